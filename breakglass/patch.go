package breakglass

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
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

// podSpecPaths are where workloads keep their pod template's spec.
var podSpecPaths = [][]string{{"spec", "template", "spec"}, {"spec", "jobTemplate", "spec", "template", "spec"}}

// imagePatch builds the strategic merge patch of the --image (and
// --replicas) shortcuts for live, refusing a container name the workload
// does not have: a strategic merge by name would add a new container.
func (p PatchSpec) imagePatch(t audit.Target, live map[string]any) ([]byte, error) {
	path := []string{"spec"}
	if t.Kind != "Pod" {
		path = nil
		for _, candidate := range podSpecPaths {
			if _, ok, _ := unstructured.NestedMap(live, candidate...); ok {
				path = candidate
				break
			}
		}
		if path == nil {
			return nil, inputError(InputImage, "", "%s has no pod template, so no container image can be set there: give a patch instead", t)
		}
	}
	kinds := map[string]string{}
	var names []string
	for _, list := range []string{"initContainers", "containers"} {
		items, _, _ := unstructured.NestedSlice(live, append(append([]string(nil), path...), list)...)
		for _, item := range items {
			if m, ok := item.(map[string]any); ok {
				if name, ok := m["name"].(string); ok {
					kinds[name] = list
					label := name
					if list == "initContainers" {
						label += " (init)"
					}
					names = append(names, label)
				}
			}
		}
	}
	lists := map[string][]any{}
	var unknown []string
	for _, name := range sortedKeys(p.Images) {
		list, ok := kinds[name]
		if !ok {
			unknown = append(unknown, name)
			continue
		}
		lists[list] = append(lists[list], map[string]any{"name": name, "image": p.Images[name]})
	}
	if len(unknown) > 0 {
		return nil, inputError(InputImage, "", "names container %s, which %s does not have (it has %s)", strings.Join(unknown, ", "), t, strings.Join(names, ", "))
	}
	podSpec := map[string]any{}
	for list, items := range lists {
		podSpec[list] = items
	}
	patch := map[string]any{}
	if err := unstructured.SetNestedField(patch, podSpec, path...); err != nil {
		return nil, err
	}
	if p.Replicas != nil {
		if err := unstructured.SetNestedField(patch, int64(*p.Replicas), "spec", "replicas"); err != nil {
			return nil, err
		}
	}
	return json.Marshal(patch)
}
