// Package proposal turns a break-glass session's live fix into the Git
// change that makes an Application's source render it: it finds the file
// and the YAML node that hold each patched field, edits the text in place
// (comments, key order, quoting and the rest of the file stay byte for
// byte), checks that the source then renders the live values and nothing
// else changed, and hands the change to Git and to a pull or merge request.
// Plain manifests are edited where they define the object, a kustomize
// overlay as kustomize edit would, a Helm chart's value files where
// rendering the chart proves the value. It never guesses: what it cannot
// map to one place (a Helm field no single value yields, several sources,
// the source hydrator, a value it cannot write in place) is refused,
// saying why, and it never prints.
package proposal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// ErrCannotPropose is a change the proposal cannot make in Git without
// guessing: it must be made by hand, and the error says why.
var ErrCannotPropose = errors.New("cannot propose this change in Git")

// NotRendered is an edit's target that the source does not render: of an
// Application with several sources, another may. It is ErrCannotPropose.
type NotRendered struct{ Why string }

func (e *NotRendered) Error() string { return ErrCannotPropose.Error() + ": " + e.Why }

// Is makes a NotRendered ErrCannotPropose.
func (e *NotRendered) Is(target error) bool { return target == ErrCannotPropose }

// Edit is one field to write: the value Value (nil with Delete to remove
// it) at Path, a JSON pointer with named list items by name as audit
// records spell it, of the object Target.
type Edit struct {
	Target audit.Target
	Path   string
	Value  any
	Delete bool
}

// File is a manifest file of a source: its path in the repository and
// its content.
type File struct {
	Path string
	Data []byte
}

// Document is one YAML document of a file, as its object, or one object
// a source renders (Index -1, File saying what rendered it).
type Document struct {
	File   string
	Index  int
	Object map[string]any
}

// Where names the document in messages: its file and place there, or the
// rendered object.
func (d Document) Where() string {
	if d.Index < 0 {
		kind, _ := d.Object["kind"].(string)
		meta, _ := d.Object["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		return fmt.Sprintf("%s (rendered by %s)", strings.ToLower(kind)+"/"+name, d.File)
	}
	return fmt.Sprintf("%s document %d", d.File, d.Index+1)
}

// Rendered parses the objects of a YAML stream a renderer wrote (kustomize
// build, helm template), skipping empty documents.
func Rendered(by string, data []byte) ([]Document, error) {
	docs, err := Documents([]File{{Path: by, Data: data}})
	if err != nil {
		return nil, err
	}
	for i := range docs {
		docs[i].Index = -1
	}
	return docs, nil
}

// Matches is whether the document is the object t, a document without a
// namespace being in defaultNamespace.
func (d Document) Matches(t audit.Target, defaultNamespace string) bool {
	apiVersion, _ := d.Object["apiVersion"].(string)
	group := ""
	if i := strings.Index(apiVersion, "/"); i >= 0 {
		group = apiVersion[:i]
	}
	kind, _ := d.Object["kind"].(string)
	meta, _ := d.Object["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
	if namespace == "" {
		namespace = defaultNamespace
	}
	return group == t.Group && kind == t.Kind && name == t.Name && (t.Namespace == "" || namespace == t.Namespace)
}

// Documents parses every YAML document of files, in order, skipping empty
// ones, as Argo CD's directory source reads them.
func Documents(files []File) ([]Document, error) {
	var out []Document
	for _, f := range files {
		nodes, err := parse(f.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		for i, n := range nodes {
			var obj map[string]any
			if err := n.Decode(&obj); err != nil {
				return nil, fmt.Errorf("%s document %d: %w", f.Path, i+1, err)
			}
			if obj != nil {
				out = append(out, Document{File: f.Path, Index: i, Object: obj})
			}
		}
	}
	return out, nil
}

// parse is every document of data as a YAML node.
func parse(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, &n)
	}
}

// EditFiles applies edits to the one document of files that is each
// edit's target, in place in the text, and returns the files it changed.
// A target found in no document, or in more than one, is refused.
func EditFiles(files []File, defaultNamespace string, edits []Edit) ([]File, error) {
	docs, err := Documents(files)
	if err != nil {
		return nil, err
	}
	var pending fileEdits
	for _, e := range edits {
		var found []Document
		for _, d := range docs {
			if d.Matches(e.Target, defaultNamespace) {
				found = append(found, d)
			}
		}
		switch len(found) {
		case 0:
			return nil, &NotRendered{Why: fmt.Sprintf("no manifest in the source defines %s", e.Target)}
		case 1:
		default:
			return nil, fmt.Errorf("%w: %s is defined in %s and %s", ErrCannotPropose, e.Target, found[0].File, found[1].File)
		}
		file := fileNamed(files, found[0].File)
		nodes, err := parse(file.Data)
		if err != nil {
			return nil, err
		}
		te, err := editNode(file.Data, nodes[found[0].Index], e)
		if err != nil {
			return nil, fmt.Errorf("%s in %s: %w", e.Path, file.Path, err)
		}
		pending.add(file.Path, te)
	}
	return pending.apply(files)
}

// fileEdits are text edits of several files, kept in the order the files
// were first edited.
type fileEdits struct {
	order  []string
	byFile map[string][]textEdit
}

func (f *fileEdits) add(path string, te textEdit) {
	if f.byFile == nil {
		f.byFile = map[string][]textEdit{}
	}
	if _, seen := f.byFile[path]; !seen {
		f.order = append(f.order, path)
	}
	f.byFile[path] = append(f.byFile[path], te)
}

// apply is each edited file of files with its edits made.
func (f *fileEdits) apply(files []File) ([]File, error) {
	var out []File
	for _, path := range f.order {
		data, err := applyText(fileNamed(files, path).Data, f.byFile[path])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, File{Path: path, Data: data})
	}
	return out, nil
}

func fileNamed(files []File, path string) File {
	for _, f := range files {
		if f.Path == path {
			return f
		}
	}
	return File{}
}

// textEdit replaces the bytes [from, to) of a file with text.
type textEdit struct {
	from, to int
	text     string
}

// applyText applies edits that do not overlap, from the last to the first.
// Insertions at the same offset land in the order edits lists them.
func applyText(data []byte, edits []textEdit) ([]byte, error) {
	sorted := append([]textEdit(nil), edits...)
	slices.Reverse(sorted)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].from > sorted[j].from })
	out := append([]byte(nil), data...)
	for i, e := range sorted {
		if i > 0 && e.to > sorted[i-1].from {
			return nil, fmt.Errorf("%w: two edits overlap", ErrCannotPropose)
		}
		out = append(out[:e.from:e.from], append([]byte(e.text), out[e.to:]...)...)
	}
	return out, nil
}

// editNode is the text edit that makes doc hold e.
func editNode(data []byte, doc *yaml.Node, e Edit) (textEdit, error) {
	lines := lineStarts(data)
	node := doc
	if node.Kind == yaml.DocumentNode && len(node.Content) == 1 {
		node = node.Content[0]
	}
	segs := redact.Segments(e.Path)
	var key *yaml.Node // the key node of node, when node is a mapping's value
	for i, seg := range segs {
		if node.Style&yaml.FlowStyle != 0 {
			return textEdit{}, fmt.Errorf("%w: the value is in a flow collection ({…} or […]), which is not edited in place", ErrCannotPropose)
		}
		switch node.Kind {
		case yaml.MappingNode:
			k, v := mappingEntry(node, seg)
			if v == nil {
				if e.Delete {
					return textEdit{}, fmt.Errorf("%w: Git does not set it either, yet Argo CD renders it", ErrCannotPropose)
				}
				return addKeys(data, lines, node, segs[i:], e.Value)
			}
			key, node = k, v
		case yaml.SequenceNode:
			item, err := sequenceItem(node, seg)
			if err != nil {
				return textEdit{}, err
			}
			key, node = nil, item
		case yaml.AliasNode:
			return textEdit{}, fmt.Errorf("%w: the value is reached through the alias *%s; edit its anchor by hand", ErrCannotPropose, node.Value)
		default:
			return textEdit{}, fmt.Errorf("%w: %s is a scalar in Git, not an object", ErrCannotPropose, "/"+strings.Join(segs[:i], "/"))
		}
	}
	if e.Delete {
		if key == nil {
			return textEdit{}, fmt.Errorf("%w: removing a list item is not edited in place", ErrCannotPropose)
		}
		return deleteEntry(data, lines, key, node)
	}
	return replaceScalar(data, lines, node, e.Value)
}

// mappingEntry is the key and value of key in mapping m, nil when absent.
func mappingEntry(m *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// sequenceItem is the item seg names: by name when every item has one (as
// audit.Diff keys such lists), else by index.
func sequenceItem(s *yaml.Node, seg string) (*yaml.Node, error) {
	named := len(s.Content) > 0
	for _, item := range s.Content {
		if item.Kind != yaml.MappingNode {
			named = false
			break
		}
		if _, v := mappingEntry(item, "name"); v == nil || v.Kind != yaml.ScalarNode {
			named = false
			break
		}
	}
	if named {
		for _, item := range s.Content {
			if _, v := mappingEntry(item, "name"); v.Value == seg {
				return item, nil
			}
		}
		return nil, fmt.Errorf("%w: Git has no list item named %q there; add it by hand", ErrCannotPropose, seg)
	}
	i, err := strconv.Atoi(seg)
	if err != nil || i < 0 || i >= len(s.Content) {
		return nil, fmt.Errorf("%w: Git's list has no item %q", ErrCannotPropose, seg)
	}
	return s.Content[i], nil
}

// replaceScalar rewrites the scalar n as value, in n's quoting style.
func replaceScalar(data []byte, lines []int, n *yaml.Node, value any) (textEdit, error) {
	if n.Kind != yaml.ScalarNode || !isScalar(value) {
		return textEdit{}, fmt.Errorf("%w: a whole object or list changed there; only single values are edited in place", ErrCannotPropose)
	}
	from := offset(lines, n.Line, n.Column)
	end, err := scalarEnd(data, from, n)
	if err != nil {
		return textEdit{}, err
	}
	text, err := scalarText(value, n.Style)
	if err != nil {
		return textEdit{}, err
	}
	return textEdit{from: from, to: end, text: text}, nil
}

func isScalar(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return false
	}
	return true
}

// scalarEnd is where the scalar n that starts at from ends in data.
func scalarEnd(data []byte, from int, n *yaml.Node) (int, error) {
	switch {
	case n.Style&yaml.DoubleQuotedStyle != 0:
		for i := from + 1; i < len(data); i++ {
			switch data[i] {
			case '\\':
				i++
			case '"':
				return i + 1, nil
			case '\n':
				return 0, fmt.Errorf("%w: a quoted value over several lines", ErrCannotPropose)
			}
		}
	case n.Style&yaml.SingleQuotedStyle != 0:
		for i := from + 1; i < len(data); i++ {
			switch {
			case data[i] == '\'' && i+1 < len(data) && data[i+1] == '\'':
				i++
			case data[i] == '\'':
				return i + 1, nil
			case data[i] == '\n':
				return 0, fmt.Errorf("%w: a quoted value over several lines", ErrCannotPropose)
			}
		}
	case n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		return 0, fmt.Errorf("%w: a block scalar (| or >) is not edited in place", ErrCannotPropose)
	case n.Tag == "!!null" && n.Value == "":
		return from, nil
	default:
		end := from + len(n.Value)
		if end > len(data) || string(data[from:end]) != n.Value || end < len(data) && data[end] != '\n' && data[end] != ' ' && data[end] != '\t' && data[end] != '\r' {
			return 0, fmt.Errorf("%w: the value is not written plainly on one line", ErrCannotPropose)
		}
		return end, nil
	}
	return 0, fmt.Errorf("%w: an unterminated quoted value", ErrCannotPropose)
}

// scalarText is value as YAML in style (the old value's) where it can be.
func scalarText(value any, style yaml.Style) (string, error) {
	s, isString := value.(string)
	switch {
	case isString && strings.ContainsAny(s, "\n\r"):
		return "", fmt.Errorf("%w: a value over several lines", ErrCannotPropose)
	case isString && style&yaml.DoubleQuotedStyle != 0:
		return strconv.Quote(s), nil
	case isString && style&yaml.SingleQuotedStyle != 0:
		return "'" + strings.ReplaceAll(s, "'", "''") + "'", nil
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(value); err != nil {
		return "", err
	}
	_ = enc.Close()
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// addKeys writes the keys segs (the first missing from mapping m) holding
// value, as new lines at the end of m.
func addKeys(data []byte, lines []int, m *yaml.Node, segs []string, value any) (textEdit, error) {
	if len(m.Content) == 0 || m.Style&yaml.FlowStyle != 0 {
		return textEdit{}, fmt.Errorf("%w: the object that would hold it is empty or in flow style ({…})", ErrCannotPropose)
	}
	var nested any = value
	for i := len(segs) - 1; i >= 1; i-- {
		if _, err := strconv.Atoi(segs[i]); err == nil {
			return textEdit{}, fmt.Errorf("%w: a new list item would be needed", ErrCannotPropose)
		}
		nested = map[string]any{segs[i]: nested}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(map[string]any{segs[0]: nested}); err != nil {
		return textEdit{}, err
	}
	_ = enc.Close()
	indent := strings.Repeat(" ", m.Content[0].Column-1)
	var text strings.Builder
	for _, l := range strings.SplitAfter(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		text.WriteString(indent + l)
	}
	text.WriteString("\n")
	at := subtreeEnd(data, lines, m, m.Content[0].Column-1)
	if at == len(data) && at > 0 && data[at-1] != '\n' {
		return textEdit{from: at, to: at, text: "\n" + strings.TrimSuffix(text.String(), "\n")}, nil
	}
	return textEdit{from: at, to: at, text: text.String()}, nil
}

// deleteEntry removes the key k and its value v, whole lines.
func deleteEntry(data []byte, lines []int, k, v *yaml.Node) (textEdit, error) {
	from := offset(lines, k.Line, 1)
	if strings.TrimSpace(string(data[from:offset(lines, k.Line, k.Column)])) != "" {
		return textEdit{}, fmt.Errorf("%w: the key shares its line with a list item's dash", ErrCannotPropose)
	}
	holder := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{k, v}}
	return textEdit{from: from, to: subtreeEnd(data, lines, holder, k.Column-1)}, nil
}

// subtreeEnd is the offset of the line after everything n spans: the
// first line past n's last node that is not blank and not indented deeper
// than indent, less the blank lines before it.
func subtreeEnd(data []byte, lines []int, n *yaml.Node, indent int) int {
	end, blankFrom := len(data), -1
	for l := lastLine(n) + 1; l <= len(lines); l++ {
		start, stop := lines[l-1], len(data)
		if l < len(lines) {
			stop = lines[l]
		}
		text := strings.TrimRight(string(data[start:stop]), "\r\n")
		trimmed := strings.TrimLeft(text, " ")
		if trimmed == "" {
			if blankFrom < 0 {
				blankFrom = start
			}
			continue
		}
		if len(text)-len(trimmed) <= indent {
			end = start
			break
		}
		blankFrom = -1
	}
	if blankFrom >= 0 && blankFrom < end {
		end = blankFrom
	}
	return end
}

// lastLine is the last line any node under n starts on.
func lastLine(n *yaml.Node) int {
	last := n.Line
	for _, c := range n.Content {
		if l := lastLine(c); l > last {
			last = l
		}
	}
	return last
}

// lineStarts is the offset of each line's first byte; line 1 is at 0.
func lineStarts(data []byte) []int {
	starts := []int{0}
	for i, b := range data {
		if b == '\n' && i+1 < len(data) {
			starts = append(starts, i+1)
		}
	}
	return starts
}

func offset(lines []int, line, column int) int {
	return lines[line-1] + column - 1
}

// Apply is obj with edits made to the decoded object, the way Argo CD
// would read the edited file: what a verified edit must render.
func Apply(obj map[string]any, edits []Edit) (map[string]any, error) {
	out := deepCopy(obj).(map[string]any)
	for _, e := range edits {
		if err := setPath(out, redact.Segments(e.Path), e.Value, e.Delete); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Path, err)
		}
	}
	return out, nil
}

func setPath(v any, segs []string, value any, del bool) error {
	switch t := v.(type) {
	case map[string]any:
		if len(segs) == 1 {
			if del {
				delete(t, segs[0])
			} else {
				t[segs[0]] = normalise(value)
			}
			return nil
		}
		next, ok := t[segs[0]]
		if !ok {
			next = map[string]any{}
			t[segs[0]] = next
		}
		return setPath(next, segs[1:], value, del)
	case []any:
		for i, item := range t {
			if m, ok := item.(map[string]any); ok && audit.Named(t) && m["name"] == segs[0] || !audit.Named(t) && strconv.Itoa(i) == segs[0] {
				if len(segs) == 1 {
					t[i] = normalise(value)
					return nil
				}
				return setPath(item, segs[1:], value, del)
			}
		}
	}
	return fmt.Errorf("%w: no such place in the object", ErrCannotPropose)
}

// normalise is v as YAML decodes it, so that it compares with a document.
func normalise(v any) any {
	b, err := yaml.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if yaml.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		l := make([]any, len(t))
		for i, x := range t {
			l[i] = deepCopy(x)
		}
		return l
	}
	return v
}

// Same is whether two decoded documents are equal.
func Same(a, b any) bool { return reflect.DeepEqual(a, b) }
