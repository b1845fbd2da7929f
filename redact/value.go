package redact

import (
	"strconv"
	"strings"
)

// Value returns a redacted deep copy of a JSON value (as decoded into any):
// scalars under secret-looking keys, the value of a {"name": SECRET-LOOKING,
// "value": …} item (env vars, Helm parameters), the argument after a
// secret-looking --flag in a list of strings, and credential-shaped text
// anywhere.
func Value(v any) any {
	return valueAt(nil, v, nil)
}

// All returns a deep copy of v with every scalar replaced, keeping the
// shape: for values of a Secret, where every value is secret.
func All(v any) any {
	return value(v, true)
}

// valueAt is Value for v at segs (a path, list items by name): free text
// there is recorded by its structure only. With a kind (a live resource's),
// a value is kept only where the kind's schema keeps it (Kept), and a
// string there is judged by its shape too; without one (an object of this
// project's or Argo CD's own), by its key and shape alone.
func valueAt(segs []string, v any, kind *GroupKind) any {
	if freeText(segs, v, kind) {
		return describe(v)
	}
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		name, _ := t["name"].(string)
		for k, val := range t {
			switch {
			case (Name(name) && k == "value") || (Name(k) && !isReference(val)):
				out[k] = scalarsRedacted(val)
			default:
				out[k] = valueAt(append(segs[:len(segs):len(segs)], k), val, kind)
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, item := range t {
			if _, ok := item.(string); ok && i > 0 && flagWantsValue(t[i-1]) {
				out[i] = Redacted
				continue
			}
			seg := strconv.Itoa(i)
			if m, ok := item.(map[string]any); ok {
				if name, ok := m["name"].(string); ok && name != "" {
					seg = name
				}
			}
			out[i] = valueAt(append(segs[:len(segs):len(segs)], seg), item, kind)
		}
		return out
	case string:
		return Text(t)
	case nil:
		return nil
	}
	if kind != nil && !Kept(*kind, segs) {
		return Redacted
	}
	return v
}

func value(v any, all bool) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		secretItem := false
		if name, ok := t["name"].(string); ok && Name(name) {
			secretItem = true
		}
		for k, val := range t {
			switch {
			case all || (secretItem && k == "value") || (Name(k) && !isReference(val)):
				out[k] = scalarsRedacted(val)
			default:
				out[k] = value(val, false)
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, item := range t {
			if all {
				out[i] = value(item, true)
				continue
			}
			if i > 0 && flagWantsValue(t[i-1]) {
				if _, ok := item.(string); ok {
					out[i] = Redacted
					continue
				}
			}
			out[i] = value(item, false)
		}
		return out
	case string:
		if all {
			return Redacted
		}
		return Text(t)
	}
	if all && v != nil {
		return Redacted
	}
	return v
}

// scalarsRedacted replaces v when it is a scalar and redacts everything
// inside it otherwise.
func scalarsRedacted(v any) any {
	switch v.(type) {
	case nil:
		return nil
	case map[string]any, []any:
		return value(v, true)
	}
	return Redacted
}

// flagWantsValue is true for an argument like --password (no "="), whose
// value is the next argument.
func flagWantsValue(v any) bool {
	s, ok := v.(string)
	if !ok || !strings.HasPrefix(s, "-") || strings.Contains(s, "=") {
		return false
	}
	return Name(strings.TrimLeft(s, "-"))
}

// isReference is true for a map that names a credential kept elsewhere
// (a volume's secret: {secretName: …}, a {name, key} selector) rather than
// holding one: its fields are judged one by one.
func isReference(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	_, secretName := m["secretName"]
	_, name := m["name"]
	return secretName || name
}

func isContainer(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}

// Path reports whether a field path (a JSON pointer whose list items are
// spelt by name, as /spec/template/spec/containers/web/env/DB_PASSWORD/value)
// leads to a credential: its last key is secret-looking, or it is the value
// of a list item whose name is.
func Path(path string) bool {
	segs := Segments(path)
	if len(segs) == 0 {
		return false
	}
	last := segs[len(segs)-1]
	if Name(last) {
		return true
	}
	return len(segs) > 1 && last == "value" && Name(segs[len(segs)-2])
}

// Segments splits a JSON pointer into its unescaped segments.
func Segments(path string) []string {
	if path == "" || path == "/" {
		return nil
	}
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, s := range segs {
		segs[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return segs
}

// At returns a redacted copy of v, the value found at path of a live
// resource of kind k: All of it for a Secret or when the path is a
// credential's; otherwise a value only where k's schema keeps it (and a
// string there judged by its shape too), every other string by its
// structure, every other scalar redacted.
// A map or list at a secret-looking path is judged field by field: the
// path may end in a list item's name (a container called auth-proxy).
func At(k GroupKind, path string, v any) any {
	if k.IsSecret() {
		return All(v)
	}
	if Path(path) && !isContainer(v) {
		return Redacted
	}
	return valueAt(Segments(path), v, &k)
}
