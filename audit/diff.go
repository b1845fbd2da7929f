package audit

import (
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// ignoredPaths are fields the API server changes on every write; they are
// not part of what a patch changed.
var ignoredPaths = []string{"/metadata/resourceVersion", "/metadata/managedFields", "/metadata/generation", "/status", "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration"}

// Diff lists the leaf paths (JSON pointer) whose values differ between two
// versions of an object. Lists of named items (containers, env) are keyed by
// name, so a path reads /spec/template/spec/containers/web/image.
func Diff(before, after map[string]any) []Change {
	var changes []Change
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

func diffValue(path string, a, b any, out *[]Change) {
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
		if ak, bk, ok := ByName(al), ByName(bl), Named(al) && Named(bl); ok {
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
		*out = append(*out, Change{Path: path, Before: a, After: b})
	}
}

// Named is whether every item of list l is an object with a string name:
// such a list is addressed by item name in a path, not by index.
func Named(l []any) bool {
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

// ByName is the items of list l by their name.
func ByName(l []any) map[string]any {
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

// Lookup follows a path as Diff writes it: map keys, list items by name
// (or index).
func Lookup(v any, path string) (any, bool) {
	for _, seg := range redact.Segments(path) {
		switch t := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = t[seg]; !ok {
				return nil, false
			}
		case []any:
			if Named(t) {
				var ok bool
				if v, ok = ByName(t)[seg]; !ok {
					return nil, false
				}
				continue
			}
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(t) {
				return nil, false
			}
			v = t[i]
		default:
			return nil, false
		}
	}
	return v, true
}
