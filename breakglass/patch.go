package breakglass

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// PatchSpec is the emergency change as the user gave it: a patch body with
// its type, or the --image / --replicas shortcuts.
type PatchSpec struct {
	Type     string            // strategic, merge or json
	Body     string            // JSON or YAML
	Images   map[string]string // container name → image
	Replicas *int32
}

// PatchTypes maps --type values to API patch types.
var PatchTypes = map[string]types.PatchType{
	"strategic": types.StrategicMergePatchType,
	"merge":     types.MergePatchType,
	"json":      types.JSONPatchType,
}

// MaxPatchBytes bounds a patch as given (--patch or --patch-file): far
// more than any emergency change needs, far less than what would stall the
// command or overflow an audit record.
const MaxPatchBytes = 1 << 20

// Empty reports whether no change was given at all.
func (p PatchSpec) Empty() bool {
	return len(p.Images) == 0 && p.Replicas == nil && strings.TrimSpace(p.Body) == ""
}

// Build returns the patch type and JSON body to send, validating the input.
// Shortcuts build a strategic merge patch of the pod template or replicas.
func (p PatchSpec) Build() (string, []byte, error) {
	shortcuts := len(p.Images) > 0 || p.Replicas != nil
	if shortcuts && p.Body != "" {
		return "", nil, inputError(InputChange, "", "an image or replicas change cannot be combined with a patch: use one way of saying the change")
	}
	if shortcuts {
		spec := map[string]any{}
		if p.Replicas != nil {
			if *p.Replicas < 0 {
				return "", nil, inputError(InputReplicas, strconv.Itoa(int(*p.Replicas)), "must be zero or more")
			}
			spec["replicas"] = *p.Replicas
		}
		if len(p.Images) > 0 {
			names := make([]string, 0, len(p.Images))
			for name := range p.Images {
				names = append(names, name)
			}
			sort.Strings(names)
			var containers []any
			for _, name := range names {
				containers = append(containers, map[string]any{"name": name, "image": p.Images[name]})
			}
			spec["template"] = map[string]any{"spec": map[string]any{"containers": containers}}
		}
		body, err := json.Marshal(map[string]any{"spec": spec})
		return "strategic", body, err
	}
	if p.Empty() {
		return "", nil, inputError(InputChange, "", "none given: give an image, replicas or a patch")
	}
	if len(p.Body) > MaxPatchBytes {
		return "", nil, fmt.Errorf("%w (%d KiB): an emergency patch changes a few fields; patch in smaller steps", ErrPatchTooLarge, len(p.Body)>>10)
	}
	typ := p.Type
	if typ == "" {
		typ = "strategic"
	}
	if _, ok := PatchTypes[typ]; !ok {
		return "", nil, inputError(InputPatchType, typ, "use strategic, merge or json")
	}
	body, err := yaml.YAMLToJSON([]byte(p.Body))
	if err != nil {
		return "", nil, fmt.Errorf("the patch is neither JSON nor YAML: %v", err)
	}
	if len(body) > MaxPatchBytes {
		// YAML aliases can expand a small file into a huge patch.
		return "", nil, fmt.Errorf("%w once YAML aliases are expanded (%d KiB): write the patch out in full", ErrPatchTooLarge, len(body)>>10)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return "", nil, fmt.Errorf("the patch is not valid JSON: %v", err)
	}
	switch v.(type) {
	case []any:
		if typ != "json" {
			return "", nil, inputError(InputPatch, "", "a JSON array is a JSON patch: set the patch type to json")
		}
	case map[string]any:
		if typ == "json" {
			return "", nil, inputError(InputPatch, "", `a JSON patch is an array of operations, like [{"op":"replace","path":"/spec/replicas","value":3}]`)
		}
	default:
		return "", nil, inputError(InputPatch, "", "must be a JSON object (or, for a JSON patch, an array)")
	}
	return typ, body, nil
}

// ParseImages parses CONTAINER=IMAGE values.
func ParseImages(values []string) (map[string]string, error) {
	images := map[string]string{}
	for _, v := range values {
		name, image, ok := strings.Cut(v, "=")
		if !ok || name == "" || image == "" {
			return nil, inputError(InputImage, v, "use CONTAINER=IMAGE, e.g. web=registry.example/web:1.2.2")
		}
		if _, dup := images[name]; dup {
			return nil, inputError(InputImage, "", "names container %q twice", name)
		}
		images[name] = image
	}
	return images, nil
}

// ignoredPaths are fields the API server changes on every write; they are
// not part of what a patch changed.
var ignoredPaths = []string{"/metadata/resourceVersion", "/metadata/managedFields", "/metadata/generation", "/status", "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration"}

// Diff lists the leaf paths (JSON pointer) whose values differ between two
// versions of an object. Lists of named items (containers, env) are keyed by
// name, so a path reads /spec/template/spec/containers/web/image.
func Diff(before, after map[string]any) []audit.Change {
	var changes []audit.Change
	diffValue("", before, after, &changes)
	kept := changes[:0]
	for _, c := range changes {
		if !ignored(c.Path) {
			kept = append(kept, c)
		}
	}
	return kept
}

func ignored(path string) bool {
	for _, p := range ignoredPaths {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

func diffValue(path string, a, b any, out *[]audit.Change) {
	am, aIsMap := a.(map[string]any)
	bm, bIsMap := b.(map[string]any)
	if aIsMap && bIsMap {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			diffValue(path+"/"+escapePointer(k), am[k], bm[k], out)
		}
		return
	}
	al, aIsList := a.([]any)
	bl, bIsList := b.([]any)
	if aIsList && bIsList {
		if ak, bk, ok := byName(al), byName(bl), named(al) && named(bl); ok {
			diffValue(path, ak, bk, out)
			return
		}
		if len(al) == len(bl) {
			for i := range al {
				diffValue(path+"/"+strconv.Itoa(i), al[i], bl[i], out)
			}
			return
		}
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, audit.Change{Path: path, Before: a, After: b})
	}
}

func named(l []any) bool {
	if len(l) == 0 {
		return false
	}
	for _, item := range l {
		m, ok := item.(map[string]any)
		if !ok {
			return false
		}
		if _, ok := m["name"].(string); !ok {
			return false
		}
	}
	return true
}

func byName(l []any) map[string]any {
	m := map[string]any{}
	for _, item := range l {
		if im, ok := item.(map[string]any); ok {
			if name, ok := im["name"].(string); ok {
				m[name] = item
			}
		}
	}
	return m
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
