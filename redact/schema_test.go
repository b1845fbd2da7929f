package redact

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// apiTypes are the k8s.io/api types of each kind the schema keeps values
// of; a path must exist in one of them.
var apiTypes = map[GroupKind][]any{
	{"apps", "Deployment"}:                     {appsv1.Deployment{}},
	{"apps", "StatefulSet"}:                    {appsv1.StatefulSet{}},
	{"apps", "DaemonSet"}:                      {appsv1.DaemonSet{}},
	{"apps", "ReplicaSet"}:                     {appsv1.ReplicaSet{}},
	{"batch", "Job"}:                           {batchv1.Job{}},
	{"batch", "CronJob"}:                       {batchv1.CronJob{}},
	{"", "Pod"}:                                {corev1.Pod{}},
	{"", "PodTemplate"}:                        {corev1.PodTemplate{}},
	{"", "Service"}:                            {corev1.Service{}},
	{"autoscaling", "HorizontalPodAutoscaler"}: {autoscalingv2.HorizontalPodAutoscaler{}, autoscalingv1.HorizontalPodAutoscaler{}},
	{"policy", "PodDisruptionBudget"}:          {policyv1.PodDisruptionBudget{}},
}

// TestSchemaPathsExistInTheAPITypes: a typo in the schema would keep
// nothing (or, ending at an object, nothing either): every kept path must
// name a scalar field of the kind's Go type.
func TestSchemaPathsExistInTheAPITypes(t *testing.T) {
	for _, k := range Kinds() {
		types, ok := apiTypes[k]
		if !ok {
			t.Errorf("%v has a schema but no API type to check it against", k)
			continue
		}
		paths := Schema(k)
		if len(paths) == 0 {
			t.Errorf("%v keeps nothing", k)
		}
		for _, p := range paths {
			found := false
			for _, typ := range types {
				found = found || scalarAt(reflect.TypeOf(typ), Segments(p))
			}
			if !found {
				t.Errorf("%v: %s is not a scalar field of %T", k, p, types[0])
			}
		}
	}
}

var (
	intOrString = reflect.TypeOf(intstr.IntOrString{})
	quantity    = reflect.TypeOf(resource.Quantity{})
)

// scalarAt follows segs through typ by JSON names (a list item or map key
// is any segment) and reports whether it ends at a scalar.
func scalarAt(typ reflect.Type, segs []string) bool {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if len(segs) == 0 {
		switch typ.Kind() {
		case reflect.String, reflect.Bool, reflect.Int, reflect.Int32, reflect.Int64:
			return true
		}
		return typ == intOrString || typ == quantity
	}
	switch typ.Kind() {
	case reflect.Slice, reflect.Map:
		return scalarAt(typ.Elem(), segs[1:])
	case reflect.Struct:
		if f, ok := jsonField(typ, segs[0]); ok {
			return scalarAt(f, segs[1:])
		}
	}
	return false
}

// jsonField finds the field of a struct called name in JSON, through
// inlined structs.
func jsonField(typ reflect.Type, name string) (reflect.Type, bool) {
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name {
			return f.Type, true
		}
		if tag == "" && f.Anonymous {
			if inner, ok := jsonField(f.Type, name); ok {
				return inner, true
			}
		}
	}
	return nil, false
}

// TestSchemaWithholdsWhatLeaked covers the values issue #33 found stored
// verbatim, and the values a break-glass most often changes, which must
// stay readable.
func TestSchemaWithholdsWhatLeaked(t *testing.T) {
	const webhook = "https://hooks.example.com/services/T0001/B0001/canaryWebhookPath"
	const apiKey = "0123456789abcdef0123456789abcdef"
	template := "/spec/template"
	withheld := []struct {
		kind GroupKind
		path string
		v    any
	}{
		{deployment, template + "/metadata/annotations/notify.example.com~1webhook-url", webhook},
		{deployment, template + "/metadata/annotations/monitoring.example.com~1api-key", apiKey},
		{deployment, "/metadata/annotations/example.com~1key", apiKey},
		{deployment, template + "/spec/containers/web/livenessProbe/httpGet/path", "/healthz?key=" + apiKey},
		{deployment, template + "/spec/containers/web/readinessProbe/exec/command", []any{"sh", "-c", "curl -H 'X: " + apiKey + "'"}},
		{deployment, template + "/spec/containers/web/env/URL/value", webhook},
		{deployment, template + "/spec/containers/web/args/0", "--url=" + webhook},
		{deployment, template + "/spec/volumes/cfg/name", apiKey},
		{deployment, template + "/spec/nodeSelector/team", apiKey},
		{GroupKind{"example.com", "Store"}, "/spec/encryption/key", apiKey},
		{GroupKind{"example.com", "Store"}, "/spec/image", apiKey},
		{GroupKind{"example.com", "Store"}, "/spec/replicas", float64(1234)},
		{GroupKind{"", "ConfigMap"}, "/data/url", webhook},
		{GroupKind{"", "Service"}, "/spec/selector/app", apiKey},
	}
	for _, tc := range withheld {
		b, a := Change(tc.kind, tc.path, nil, tc.v)
		out, _ := json.Marshal([]any{b, a, At(tc.kind, tc.path, tc.v)})
		if strings.Contains(string(out), apiKey) || strings.Contains(string(out), "canaryWebhookPath") || strings.Contains(string(out), "1234") {
			t.Errorf("%v %s: recorded %s", tc.kind, tc.path, out)
		}
	}
	kept := []struct {
		kind GroupKind
		path string
		v    any
	}{
		{deployment, "/spec/replicas", float64(3)},
		{deployment, template + "/spec/containers/web/image", "registry.example/web:1.2.4"},
		{deployment, template + "/spec/initContainers/migrate/image", "registry.example/migrate:2"},
		{deployment, template + "/spec/containers/web/resources/limits/memory", "512Mi"},
		{deployment, template + "/spec/containers/web/livenessProbe/periodSeconds", float64(10)},
		{deployment, template + "/spec/containers/web/livenessProbe/httpGet/port", "http"},
		{deployment, template + "/metadata/annotations/kubectl.kubernetes.io~1restartedAt", "2026-12-04T20:00:00Z"},
		{deployment, template + "/spec/nodeSelector/kubernetes.io~1arch", "arm64"},
		{GroupKind{"apps", "StatefulSet"}, "/spec/updateStrategy/rollingUpdate/partition", float64(2)},
		{GroupKind{"batch", "CronJob"}, "/spec/jobTemplate/spec/template/spec/containers/job/image", "job:3"},
		{GroupKind{"batch", "CronJob"}, "/spec/jobTemplate/spec/backoffLimit", float64(4)},
		{GroupKind{"", "Pod"}, "/spec/containers/web/image", "web:1"},
		{GroupKind{"autoscaling", "HorizontalPodAutoscaler"}, "/spec/maxReplicas", float64(20)},
		{GroupKind{"policy", "PodDisruptionBudget"}, "/spec/minAvailable", "50%"},
		{GroupKind{"", "Service"}, "/spec/ports/http/port", float64(80)},
	}
	for _, tc := range kept {
		if b, a := Change(tc.kind, tc.path, nil, tc.v); b != nil || a != tc.v {
			t.Errorf("%v %s: %v recorded as %v, %v", tc.kind, tc.path, tc.v, b, a)
		}
	}
}

// TestPatchKeepsOnlyTheSchema: a whole strategic patch of a Deployment
// keeps its image and replicas, and nothing of the annotations or probe
// path beside them; the same body against a custom resource keeps none.
func TestPatchKeepsOnlyTheSchema(t *testing.T) {
	body := `{"spec":{"replicas":3,"template":{"metadata":{"annotations":{"hook":"https://h.example/T1/B2/canary1"}},
		"spec":{"containers":[{"name":"web","image":"web:2","livenessProbe":{"periodSeconds":5,"httpGet":{"path":"/h?key=canary2","port":8080}}}]}}}}`
	out, err := Patch([]byte(body), deployment)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "canary") {
		t.Errorf("a value outside the schema survived: %s", out)
	}
	for _, keep := range []string{`"replicas":3`, `"image":"web:2"`, `"periodSeconds":5`, `"port":8080`, `"name":"web"`, `"hook"`} {
		if !strings.Contains(out, keep) {
			t.Errorf("%s was lost: %s", keep, out)
		}
	}
	custom, err := Patch([]byte(body), GroupKind{"example.com", "Web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"canary", `"replicas":3`, "web:2", "8080"} {
		if strings.Contains(custom, gone) {
			t.Errorf("a custom resource's %s survived: %s", gone, custom)
		}
	}
}
