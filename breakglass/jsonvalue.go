package breakglass

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	var na, nb any
	_ = json.Unmarshal(ja, &na)
	_ = json.Unmarshal(jb, &nb)
	return reflect.DeepEqual(na, nb)
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// jqPath spells path (as audit.Diff spells it: /-separated, list items by
// name where every item has one) as a jq path expression on obj.
func jqPath(path string, obj any) string {
	var b strings.Builder
	node := obj
	for _, seg := range redact.Segments(path) {
		switch t := node.(type) {
		case []any:
			if audit.Named(t) {
				name, _ := json.Marshal(seg)
				fmt.Fprintf(&b, "[] | select(.name == %s) | .", name)
				node = audit.ByName(t)[seg]
				continue
			}
			if i, err := strconv.Atoi(seg); err == nil {
				fmt.Fprintf(&b, "[%d]", i)
				node = nil
				if i >= 0 && i < len(t) {
					node = t[i]
				}
				continue
			}
		case map[string]any:
			node = t[seg]
		default:
			node = nil
		}
		dot := strings.HasSuffix(b.String(), ".")
		switch {
		case jqIdent.MatchString(seg) && dot:
			b.WriteString(seg)
		case jqIdent.MatchString(seg):
			b.WriteString("." + seg)
		default:
			if b.Len() == 0 {
				b.WriteString(".")
			}
			key, _ := json.Marshal(seg)
			fmt.Fprintf(&b, "[%s]", key)
		}
	}
	return b.String()
}

func mergePatchFor(current, desired any) any {
	cm, cok := current.(map[string]any)
	dm, dok := desired.(map[string]any)
	if !cok || !dok {
		return desired
	}
	patch := map[string]any{}
	for k := range cm {
		if _, keep := dm[k]; !keep {
			patch[k] = nil
		}
	}
	for k, v := range dm {
		if !equalJSON(cm[k], v) {
			patch[k] = mergePatchFor(cm[k], v)
		}
	}
	return patch
}

// cleanForDiff is the object as a reader compares it: no managedFields,
// status or bookkeeping that every write changes, and secrets redacted.
func cleanForDiff(t audit.Target, obj map[string]any) map[string]any {
	c := audit.RedactObject(t, obj)
	delete(c, "status")
	if meta, ok := c["metadata"].(map[string]any); ok {
		for _, k := range []string{"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp"} {
			delete(meta, k)
		}
		if ann, ok := meta["annotations"].(map[string]any); ok {
			delete(ann, "kubectl.kubernetes.io/last-applied-configuration")
		}
	}
	return c
}

// digest is the SHA-256 of v's canonical JSON (keys sorted, numbers as
// float64 as any JSON reader sees them); an absent field digests as null.
func digest(v any) string {
	b, _ := json.Marshal(v)
	var n any
	_ = json.Unmarshal(b, &n)
	b, _ = json.Marshal(n)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// withResourceVersion adds a resourceVersion precondition to a patch body:
// metadata.resourceVersion in a merge or strategic patch, a replace of it in
// a JSON patch. The API server then refuses the patch with Conflict if the
// object is no longer at that version.
func withResourceVersion(patchType string, body []byte, version string) ([]byte, error) {
	if version == "" {
		return body, nil
	}
	if patchType == "json" {
		var ops []any
		if err := json.Unmarshal(body, &ops); err != nil {
			return nil, err
		}
		ops = append([]any{map[string]any{"op": "replace", "path": "/metadata/resourceVersion", "value": version}}, ops...)
		return json.Marshal(ops)
	}
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, err
	}
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	meta["resourceVersion"] = version
	return json.Marshal(obj)
}
