package redact

import (
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"strings"
)

// Patch returns a redacted copy of a patch body (the JSON sent to the API
// server). JSON-patch operation paths are resolved against objs (the object
// before the patch and, when known, after it), so that
// /spec/template/spec/containers/0/env/0/value is judged as the env var it
// names in either; a value whose list index resolves in none of them is
// redacted whole. Values are kept only where the schema of k, the kind of
// the patched object, keeps them; of a Secret, only the shape stays.
func Patch(body []byte, k GroupKind, objs ...map[string]any) (string, error) {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return "", errors.New("the patch is not JSON")
	}
	if ops, ok := v.([]any); ok {
		out := make([]any, len(ops))
		for i, op := range ops {
			out[i] = operation(op, k, objs)
		}
		v = out
	} else {
		v = At(k, "", v)
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// operation redacts the value of one RFC 6902 operation by the field its
// path resolves to.
func operation(op any, k GroupKind, objs []map[string]any) any {
	m, ok := op.(map[string]any)
	if !ok {
		return All(op)
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	val, has := m["value"]
	if !has {
		return out
	}
	path, _ := m["path"].(string)
	if k.IsSecret() {
		out["value"] = scalarsRedacted(val)
		return out
	}
	// Without objects (a second pass over a stored body) paths are judged
	// as written; with them, an index found in none is not trusted.
	strict := len(objs) > 0
	if !strict {
		objs = []map[string]any{nil}
	}
	redacted, resolved := val, false
	for _, obj := range objs {
		named, afterFlag, ok := resolve(obj, path)
		if afterFlag {
			out["value"] = scalarsRedacted(val)
			return out
		}
		resolved = resolved || ok
		redacted = At(k, named, redacted)
	}
	if strict && !resolved {
		redacted = scalarsRedacted(val)
	}
	out["value"] = redacted
	return out
}

// Resolve spells a JSON pointer into obj by name: list indexes of items
// that have a name (containers, env vars, ports) become that name. It also
// reports whether the pointer is a string argument right after a
// secret-looking --flag (as in args: ["--password", "…"]). Segments that
// obj does not have are kept as written.
func Resolve(obj map[string]any, path string) (string, bool) {
	named, afterFlag, _ := resolve(obj, path)
	return named, afterFlag
}

// resolve is Resolve that also reports whether every list index of the
// path was found in obj ("-", the end of a list, included).
func resolve(obj map[string]any, path string) (string, bool, bool) {
	segs := Segments(path)
	var cur any = obj
	out := make([]string, len(segs))
	afterFlag, ok := false, true
	for i, seg := range segs {
		out[i] = seg
		switch t := cur.(type) {
		case map[string]any:
			cur = t[seg]
		case []any:
			idx, err := strconv.Atoi(seg)
			if seg == "-" {
				idx, err = len(t), nil
			}
			if err != nil {
				cur = itemNamed(t, seg)
				continue
			}
			if idx < 0 || idx > len(t) {
				cur, ok = nil, false
				continue
			}
			if i == len(segs)-1 && idx > 0 && flagWantsValue(t[idx-1]) {
				afterFlag = true
			}
			if idx == len(t) {
				cur = nil
				continue
			}
			cur = t[idx]
			if m, ok := cur.(map[string]any); ok {
				if name, ok := m["name"].(string); ok && name != "" {
					out[i] = name
				}
			}
		default:
			if _, index := strconv.Atoi(seg); index == nil || seg == "-" {
				ok = false
			}
			cur = nil
		}
	}
	return pointer(out), afterFlag, ok
}

func itemNamed(list []any, name string) any {
	for _, item := range list {
		if m, ok := item.(map[string]any); ok && m["name"] == name {
			return m
		}
	}
	return nil
}

func pointer(segs []string) string {
	var b strings.Builder
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// Redactor redacts text as Text does and also every literal secret value it
// has learnt, so that a server error echoing a patched secret (which has no
// tell-tale shape of its own) is caught too.
type Redactor struct {
	literals []string
}

// Learn walks an original value beside its redacted copy and remembers the
// original strings the redaction changed.
func (r *Redactor) Learn(original, redacted any) {
	switch o := original.(type) {
	case map[string]any:
		rm, _ := redacted.(map[string]any)
		for k, v := range o {
			r.Learn(v, rm[k])
		}
	case []any:
		rl, _ := redacted.([]any)
		for i, v := range o {
			if i < len(rl) {
				r.Learn(v, rl[i])
			}
		}
	case string:
		if rs, ok := redacted.(string); ok && rs != o && len(o) >= 4 {
			r.literals = append(r.literals, o)
			sort.Slice(r.literals, func(i, j int) bool { return len(r.literals[i]) > len(r.literals[j]) })
		}
	case bool:
		// true and false are words of every error message.
	default:
		if redacted == Redacted && o != nil {
			if b, err := json.Marshal(o); err == nil && len(b) >= 4 {
				r.literals = append(r.literals, string(b))
			}
		}
	}
}

// Text redacts s by the learnt literals (also as they appear JSON-quoted or
// Go-quoted in an error) and then as the package's Text does.
func (r *Redactor) Text(s string) string {
	if r != nil {
		for _, lit := range r.literals {
			s = strings.ReplaceAll(s, lit, Redacted)
			if q, err := json.Marshal(lit); err == nil {
				s = strings.ReplaceAll(s, strings.Trim(string(q), `"`), Redacted)
			}
			s = strings.ReplaceAll(s, strings.Trim(strconv.Quote(lit), `"`), Redacted)
		}
	}
	return Text(s)
}
