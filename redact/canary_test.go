package redact

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// canaries fills a value of a Go API type with a distinct canary in every
// string and a distinct number in every integer, one item in every list
// and one key in every map, and remembers where each went.
type canaries struct {
	at map[string][]string // canary → path (list items by index)
}

// plant returns a JSON-shaped value of typ full of canaries; seen stops
// recursive types.
func (c *canaries) plant(typ reflect.Type, segs []string, seen map[reflect.Type]bool) any {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	leaf := func(v any) any {
		key := fmt.Sprint(v)
		c.at[key] = append([]string(nil), segs...)
		return v
	}
	switch {
	case typ == intOrString:
		return leaf(fmt.Sprintf("cnry%04dz", len(c.at)))
	case typ == quantity:
		return "1"
	case typ.Kind() == reflect.String:
		return leaf(fmt.Sprintf("cnry%04dz", len(c.at)))
	case typ.Kind() == reflect.Int32 || typ.Kind() == reflect.Int64 || typ.Kind() == reflect.Int:
		return leaf(float64(90000 + len(c.at)))
	case typ.Kind() == reflect.Bool:
		return true
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Uint8:
		return nil // bytes (a Secret's data): not in these kinds
	case typ.Kind() == reflect.Slice:
		return []any{c.plant(typ.Elem(), append(segs, "0"), seen)}
	case typ.Kind() == reflect.Map:
		return map[string]any{"example.com/k": c.plant(typ.Elem(), append(segs, "example.com/k"), seen)}
	case typ.Kind() == reflect.Struct:
		if seen[typ] {
			return nil
		}
		seen[typ] = true
		defer delete(seen, typ)
		out := map[string]any{}
		c.fields(typ, segs, seen, out)
		return out
	}
	return nil
}

func (c *canaries) fields(typ reflect.Type, segs []string, seen map[reflect.Type]bool, out map[string]any) {
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "" && f.Anonymous:
			c.fields(f.Type, segs, seen, out)
		case name == "" || name == "-" || name == "status" || !f.IsExported():
		default:
			if v := c.plant(f.Type, append(segs[:len(segs):len(segs)], name), seen); v != nil {
				out[name] = v
			}
		}
	}
}

// TestNoCanarySurvivesOutsideTheSchema plants a canary in every string and
// integer field of a whole object of each built-in kind, and of the same
// objects as a custom resource, redacts them as a patch, as a changed
// object and as a shown object, and wants each canary gone unless the
// schema keeps the field it was planted in.
func TestNoCanarySurvivesOutsideTheSchema(t *testing.T) {
	custom := GroupKind{"example.com", "Store"}
	for kind, types := range apiTypes {
		for _, typ := range types {
			c := &canaries{at: map[string][]string{}}
			obj := c.plant(reflect.TypeOf(typ), nil, map[reflect.Type]bool{})
			body, _ := json.Marshal(obj)
			for _, k := range []GroupKind{kind, custom} {
				patched, err := Patch(body, k)
				if err != nil {
					t.Fatal(err)
				}
				before, after := Change(k, "", nil, obj)
				shown, _ := json.Marshal([]any{before, after, At(k, "", obj)})
				out := patched + string(shown)
				survived := 0
				for canary, segs := range c.at {
					if !strings.Contains(out, canary) {
						continue
					}
					survived++
					if !Kept(k, segs) {
						t.Errorf("%v (%T): %s at /%s survived", k, typ, canary, strings.Join(segs, "/"))
					}
				}
				if k == kind && survived == 0 {
					t.Errorf("%v (%T): nothing kept: the fixture missed the schema", k, typ)
				}
			}
		}
	}
}

// fuzzKinds are the kinds FuzzRedactObject picks from.
var fuzzKinds = []GroupKind{deployment, {"apps", "StatefulSet"}, {"batch", "CronJob"}, {"", "Pod"}, {"", "Service"},
	{"", "ConfigMap"}, {"example.com", "Store"}, {"autoscaling", "HorizontalPodAutoscaler"}}

// FuzzRedactObject puts a secret at any path of an object of any kind and
// wants it gone from the redacted patch, change and shown object unless
// the schema keeps that path; any body at all must not panic.
func FuzzRedactObject(f *testing.F) {
	f.Add(uint8(0), "spec/template/metadata/annotations/notify.example.com~1webhook", "https://hooks.example/T1/B2/canaryX")
	f.Add(uint8(6), "spec/encryption/key", "0123456789abcdef0123456789abcdef")
	f.Add(uint8(0), "spec/template/spec/containers/0/livenessProbe/httpGet/path", "/h?key=Zq8vN3xLp0")
	f.Add(uint8(1), "metadata/labels/tier", "p@ss@word")
	f.Add(uint8(3), "spec/containers/0/image", "web:1.2.3")
	f.Add(uint8(0), "spec/template/spec/containers/0/env/0/value", "[REDACTED] (2 lines)x")
	f.Fuzz(func(t *testing.T, kindIndex uint8, path, secret string) {
		k := fuzzKinds[int(kindIndex)%len(fuzzKinds)]
		segs := Segments("/" + path)
		_, _ = Patch([]byte(path), k)
		if len(secret) < 6 || len(segs) == 0 || strings.Contains(path, secret) || strings.Contains(Redacted, secret) || Kept(k, segs) {
			return
		}
		// What the redaction writes for the secret is compared with what it
		// writes for a harmless value there: the secret may appear only as
		// often as it does anyway (in an escaped key, say).
		redacted := func(value string) string {
			var obj any = value
			for i := len(segs) - 1; i >= 0; i-- {
				if segs[i] == "0" {
					obj = []any{obj}
					continue
				}
				obj = map[string]any{segs[i]: obj}
			}
			body, _ := json.Marshal(obj)
			patched, err := Patch(body, k)
			if err != nil {
				t.Fatal(err)
			}
			before, after := Change(k, "", obj, nil)
			shown, _ := json.Marshal([]any{before, after, At(k, "", obj)})
			return patched + string(shown)
		}
		q, _ := json.Marshal(secret)
		quoted := strings.Trim(string(q), `"`)
		if out, harmless := redacted(secret), redacted("x"); strings.Count(out, quoted) > strings.Count(harmless, quoted) {
			t.Errorf("%v /%s: %q survived in %s", k, path, secret, out)
		}
	})
}
