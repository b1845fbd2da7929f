package redact

// GroupKind names the kind of a live resource. The kind, not a field's
// name, decides whether a value may be recorded: a field called key, path,
// url or token is as likely to hold a credential in one kind as a setting
// in another.
type GroupKind struct {
	Group, Kind string
}

// IsSecret is true for a core Secret, all of whose values are secret.
func (k GroupKind) IsSecret() bool { return k.Group == "" && k.Kind == "Secret" }

// The schema: for each built-in kind, the fields whose values are recorded
// and shown. Every other value (every custom resource's, every annotation
// and label but those keyed below, env values, args, commands, URLs, probe
// paths and commands, selectors, volumes) is recorded by its structure only
// (that it changed; its line count), with the record's keyed digest of the
// raw patch beside it. Paths are JSON pointers as Diff spells them; * is
// one list item, by name or index, or one map key. schema_test.go checks
// that each path exists in its k8s.io/api type and ends at a scalar.
var (
	// containerFields are kept for containers and initContainers.
	containerFields = []string{
		"name", "image", "imagePullPolicy",
		"resources/requests/*", "resources/limits/*",
		"ports/*/containerPort", "ports/*/protocol", "ports/*/name",
		"env/*/name", // also in the path of the env var's value
		"env/*/valueFrom/secretKeyRef/name", "env/*/valueFrom/secretKeyRef/key",
		"env/*/valueFrom/configMapKeyRef/name", "env/*/valueFrom/configMapKeyRef/key",
	}
	// probeFields are kept for liveness, readiness and startup probes: ports
	// and timings, never httpGet.path (a query may carry a key), host,
	// headers or exec commands.
	probeFields = []string{
		"initialDelaySeconds", "periodSeconds", "timeoutSeconds", "successThreshold", "failureThreshold",
		"terminationGracePeriodSeconds", "httpGet/port", "httpGet/scheme", "tcpSocket/port", "grpc/port",
	}
	// podSpecFields are kept in a pod's spec. Node selectors keep only the
	// well-known node labels; tolerations not their keys or values.
	podSpecFields = []string{
		"terminationGracePeriodSeconds", "activeDeadlineSeconds", "restartPolicy", "dnsPolicy",
		"serviceAccountName", "priorityClassName", "schedulerName",
		"tolerations/*/operator", "tolerations/*/effect", "tolerations/*/tolerationSeconds",
	}
	// wellKnownLabels keep their values in labels and node selectors: they
	// name versions, components, zones and machine types.
	wellKnownLabels = []string{
		"app", "version", "app.kubernetes.io~1name", "app.kubernetes.io~1version", "app.kubernetes.io~1component",
		"kubernetes.io~1os", "kubernetes.io~1arch", "topology.kubernetes.io~1zone", "topology.kubernetes.io~1region",
		"node.kubernetes.io~1instance-type",
	}
	// keptAnnotations keep their values: kubectl rollout restart's stamp
	// and settings of well-known controllers. Any other annotation may be
	// a webhook URL or an API key and keeps none.
	keptAnnotations = []string{
		"kubectl.kubernetes.io~1restartedAt", "kubectl.kubernetes.io~1default-container",
		"cluster-autoscaler.kubernetes.io~1safe-to-evict", "deployment.kubernetes.io~1revision",
	}
	// The fields each workload kind keeps under its spec.
	deploymentFields  = []string{"replicas", "paused", "minReadySeconds", "progressDeadlineSeconds", "revisionHistoryLimit", "strategy/type", "strategy/rollingUpdate/maxSurge", "strategy/rollingUpdate/maxUnavailable"}
	statefulSetFields = []string{"replicas", "minReadySeconds", "revisionHistoryLimit", "podManagementPolicy", "updateStrategy/type", "updateStrategy/rollingUpdate/partition", "updateStrategy/rollingUpdate/maxUnavailable"}
	daemonSetFields   = []string{"minReadySeconds", "revisionHistoryLimit", "updateStrategy/type", "updateStrategy/rollingUpdate/maxSurge", "updateStrategy/rollingUpdate/maxUnavailable"}
	replicaSetFields  = []string{"replicas", "minReadySeconds"}
	jobFields         = []string{"parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished", "suspend"}
	cronJobFields     = []string{"schedule", "timeZone", "suspend", "concurrencyPolicy", "startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"}
	serviceFields     = []string{"type", "ports/*/name", "ports/*/protocol", "ports/*/port", "ports/*/targetPort", "ports/*/nodePort"}
	hpaFields         = append([]string{
		"minReplicas", "maxReplicas", "targetCPUUtilizationPercentage", "metrics/*/type",
		"metrics/*/resource/name", "metrics/*/containerResource/name",
	}, metricTargets("resource", "containerResource", "pods", "object", "external")...)
	pdbFields = []string{"minAvailable", "maxUnavailable"}
)

// identity is kept for every kind, custom resources too: the object's
// own name, which its record names in target anyway.
var identity = fields(nil).with("", []string{"apiVersion", "kind", "metadata/name", "metadata/namespace"})

// metricTargets are the target numbers of an HPA's metrics of each source
// (never an external metric's name or selector).
func metricTargets(sources ...string) []string {
	var out []string
	for _, source := range sources {
		for _, f := range []string{"type", "averageUtilization", "averageValue", "value"} {
			out = append(out, "metrics/*/"+source+"/target/"+f)
		}
	}
	return out
}

// schema maps each kind to its kept fields, compiled from the lists above.
var schema = map[GroupKind]fields{
	{"apps", "Deployment"}:                     workload("/spec", deploymentFields, "/spec/template"),
	{"apps", "StatefulSet"}:                    workload("/spec", statefulSetFields, "/spec/template"),
	{"apps", "DaemonSet"}:                      workload("/spec", daemonSetFields, "/spec/template"),
	{"apps", "ReplicaSet"}:                     workload("/spec", replicaSetFields, "/spec/template"),
	{"batch", "Job"}:                           workload("/spec", jobFields, "/spec/template"),
	{"batch", "CronJob"}:                       workload("/spec", cronJobFields, "/spec/jobTemplate/spec/template").with("/spec/jobTemplate/spec", jobFields),
	{"", "Pod"}:                                workload("", nil, ""),
	{"", "PodTemplate"}:                        workload("", nil, "/template"),
	{"", "Service"}:                            metadata("").with("/spec", serviceFields),
	{"autoscaling", "HorizontalPodAutoscaler"}: metadata("").with("/spec", hpaFields),
	{"policy", "PodDisruptionBudget"}:          metadata("").with("/spec", pdbFields),
}

// fields is a set of path patterns, each split into segments.
type fields [][]string

// with adds each of paths under prefix.
func (f fields) with(prefix string, paths []string) fields {
	for _, p := range paths {
		f = append(f, Segments(prefix+"/"+p))
	}
	return f
}

// metadata is the kept labels and annotations of the object (or
// template) at prefix.
func metadata(prefix string) fields {
	return fields(nil).with(prefix+"/metadata/labels", wellKnownLabels).with(prefix+"/metadata/annotations", keptAnnotations)
}

// workload is a kind with own fields under spec and a pod template at
// template ("" for a Pod itself, whose spec is the pod's).
func workload(spec string, own []string, template string) fields {
	f := metadata("").with(spec, own)
	if template != "" {
		f = append(f, metadata(template)...)
	}
	pod := template + "/spec"
	f = f.with(pod, podSpecFields).with(pod+"/nodeSelector", wellKnownLabels)
	for _, c := range []string{"/containers", "/initContainers"} {
		f = f.with(pod+c+"/*", containerFields)
		for _, probe := range []string{"/livenessProbe", "/readinessProbe", "/startupProbe"} {
			f = f.with(pod+c+"/*"+probe, probeFields)
		}
	}
	return f
}

// Kept is whether the value at segs (a path, list items by name or index)
// of a resource of kind k is one the schema records.
func Kept(k GroupKind, segs []string) bool {
	for _, pattern := range append(identity[:len(identity):len(identity)], schema[k]...) {
		if matches(pattern, segs) {
			return true
		}
	}
	return false
}

func matches(pattern, segs []string) bool {
	if len(pattern) != len(segs) {
		return false
	}
	for i, p := range pattern {
		if p != "*" && p != segs[i] {
			return false
		}
	}
	return true
}

// Schema lists the kept paths of kind k as JSON pointers, for the test that
// checks them against the API types and for documentation.
func Schema(k GroupKind) []string {
	var out []string
	for _, p := range append(identity[:len(identity):len(identity)], schema[k]...) {
		out = append(out, pointer(p))
	}
	return out
}

// Kinds lists the kinds that keep any values.
func Kinds() []GroupKind {
	out := make([]GroupKind, 0, len(schema))
	for k := range schema {
		out = append(out, k)
	}
	return out
}
