package redact

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Free text is where secrets hide in shapes no pattern knows: a ConfigMap
// holding a whole config file (YAML, JSON, XML, INI, properties, .env), an
// env var's value, a container's args and command, a long annotation. Such
// a value is never recorded, whatever it looks like: only its structure is
// (how many lines or arguments), and for a change, which lines changed and,
// in key/value formats, their keys. Matching secret shapes stays a second
// net for every other field.

// freeText is whether the value v at segs (a path, list items by name) is
// free text: in a live resource of kind (when not nil), every string its
// schema does not keep.
func freeText(segs []string, v any, kind *GroupKind) bool {
	n := len(segs)
	_, isString := v.(string)
	switch {
	case kind != nil && isString:
		return !Kept(*kind, segs)
	case n == 2 && (segs[0] == "data" || segs[0] == "binaryData"):
		return isString
	case n >= 3 && segs[n-1] == "value" && segs[n-3] == "env":
		return isString
	case n >= 1 && (segs[n-1] == "args" || segs[n-1] == "command"):
		_, isList := v.([]any)
		return isList
	case n >= 2 && (segs[n-2] == "args" || segs[n-2] == "command"):
		return isString
	case n >= 2 && segs[n-2] == "annotations":
		s, _ := v.(string)
		return isString && (len(s) > maxAnnotationText || strings.Contains(s, "\n"))
	}
	return false
}

// maxAnnotationText is the longest annotation value recorded as it is:
// longer ones (kubectl's last-applied-configuration holds a whole object)
// are free text.
const maxAnnotationText = 256

// description is the shape of what describe and Change write.
var description = regexp.MustCompile(`^\[REDACTED\]( \((\d+ lines|\d+ arguments)(; (changed line \d+|changed lines \d+-\d+|lines removed (after|before) line \d+)(: keys [A-Za-z0-9_.\-/:]+(, [A-Za-z0-9_.\-/:]+)*)?)?\))?$`)

// described is whether s is already a description of free text (a second
// redaction pass over a stored record leaves it alone). Only the exact
// shapes count: a live value that merely starts with [REDACTED] is text
// like any other.
func described(s string) bool { return description.MatchString(s) }

// describe is the structure of free text v.
func describe(v any) any {
	switch t := v.(type) {
	case string:
		if described(t) {
			return t
		}
		if n := lineCount(t); n > 1 {
			return fmt.Sprintf("%s (%d lines)", Redacted, n)
		}
		return Redacted
	case []any:
		return fmt.Sprintf("%s (%d arguments)", Redacted, len(t))
	}
	return scalarsRedacted(v)
}

func lineCount(s string) int {
	return len(strings.Split(strings.TrimSuffix(s, "\n"), "\n"))
}

// Change redacts one changed field of a resource of kind k, the value at
// path (list items by name) before and after: free text by structure, the
// after side saying which of its lines changed and, in key/value formats,
// the keys of the lines that changed; any other value as At does.
func Change(k GroupKind, path string, before, after any) (any, any) {
	if k.IsSecret() {
		return All(before), All(after)
	}
	segs := Segments(path)
	b, bok := before.(string)
	a, aok := after.(string)
	if Path(path) || !freeText(segs, after, &k) && !freeText(segs, before, &k) {
		return At(k, path, before), At(k, path, after)
	}
	if !bok || !aok || described(b) || described(a) {
		return describeAt(k, segs, before), describeAt(k, segs, after)
	}
	if n := lineCount(a); n > 1 {
		return describe(before), fmt.Sprintf("%s (%d lines; %s)", Redacted, n, changedLines(b, a))
	}
	return describe(before), describe(a)
}

// describeAt describes v when it is free text at segs of a resource of
// kind k, and redacts it as At does otherwise (a field added or removed is
// null on one side).
func describeAt(k GroupKind, segs []string, v any) any {
	if v == nil {
		return nil
	}
	if freeText(segs, v, &k) {
		return describe(v)
	}
	return valueAt(segs, v, &k)
}

// changedLines says which lines of after differ from before: those between
// the lines both start with and those both end with (a change, not a full
// diff: it stays linear in the size of the text).
func changedLines(before, after string) string {
	bl := strings.Split(strings.TrimSuffix(before, "\n"), "\n")
	al := strings.Split(strings.TrimSuffix(after, "\n"), "\n")
	prefix := 0
	for prefix < len(bl) && prefix < len(al) && bl[prefix] == al[prefix] {
		prefix++
	}
	suffix := 0
	for suffix < len(bl)-prefix && suffix < len(al)-prefix && bl[len(bl)-1-suffix] == al[len(al)-1-suffix] {
		suffix++
	}
	first, last := prefix+1, len(al)-suffix
	var keys []string
	seen := map[string]bool{}
	for _, line := range append(append([]string{}, al[prefix:len(al)-suffix]...), bl[prefix:len(bl)-suffix]...) {
		if k := lineKey(line); k != "" && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	var where string
	switch {
	case first > last && prefix == len(al):
		where = fmt.Sprintf("lines removed after line %d", prefix)
	case first > last:
		where = fmt.Sprintf("lines removed before line %d", first)
	case first == last:
		where = "changed line " + strconv.Itoa(first)
	default:
		where = fmt.Sprintf("changed lines %d-%d", first, last)
	}
	if len(keys) > 0 {
		where += ": keys " + strings.Join(keys, ", ")
	}
	return where
}

var (
	// kvKey is the key of a key/value line: YAML (a list item too), INI,
	// properties, .env (with export), JSON.
	kvKey = regexp.MustCompile(`^\s*(?:-\s+)?(?:export\s+)?["']?([A-Za-z_][A-Za-z0-9_.\-/]*)["']?\s*[:=]`)
	// xmlKey is the element of an XML line.
	xmlKey = regexp.MustCompile(`^\s*<([A-Za-z_][A-Za-z0-9_.\-:]*)[\s/>]`)
)

// lineKey is the key a line of a key/value or XML format sets, "" for none;
// a key shaped like a credential is not one to show.
func lineKey(line string) string {
	m := kvKey.FindStringSubmatch(line)
	if m == nil {
		m = xmlKey.FindStringSubmatch(line)
	}
	if m == nil || len(m[1]) > 64 || Text(m[1]) != m[1] {
		return ""
	}
	return m[1]
}
