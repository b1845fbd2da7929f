package proposal

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// renderKustomize is kustomize build of dir (slash-separated, relative to
// root), through kustomize's own API with its default options, as Argo
// CD's repo-server runs kustomize build.
func renderKustomize(root, dir string) ([]Document, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, filepath.FromSlash(dir)))
	if err != nil {
		return nil, fmt.Errorf("%w: kustomize build %s: %v", ErrCannotPropose, dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, err
	}
	return Rendered("kustomize build "+dir, out)
}

// kustomizeChange writes edits into the overlay at dir, the one the
// Application points at, as a person would with kustomize edit: an image
// through the kustomization's images:, replicas through replicas:, any
// other field as a JSON 6902 patch file added to patches:. When that does
// not render exactly the edits (an image another object shares), every
// edit is tried as a patch instead; if neither does, the first attempt's
// difference is the refusal.
func kustomizeChange(root, dir, namespace string, edits []Edit, session string) (*Change, error) {
	name := kustomizationFile(filepath.Join(root, filepath.FromSlash(dir)))
	if name == "" {
		return nil, fmt.Errorf("%w: the Application renders %s with kustomize, but it holds no kustomization.yaml", ErrCannotPropose, dir)
	}
	original, err := readFile(root, path.Join(dir, name))
	if err != nil {
		return nil, err
	}
	before, err := renderKustomize(root, dir)
	if err != nil {
		return nil, err
	}
	var first error
	for _, mapped := range []bool{true, false} {
		c, err := tryKustomize(root, dir, original, before, namespace, edits, session, mapped)
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

func tryKustomize(root, dir string, original File, before []Document, namespace string, edits []Edit, session string, mapped bool) (*Change, error) {
	files, placed, err := EditKustomization(original, before, namespace, edits, session, mapped)
	if err != nil {
		return nil, err
	}
	var after []Document
	if err := withFiles(root, files, func() (err error) {
		after, err = renderKustomize(root, dir)
		return err
	}); err != nil {
		return nil, err
	}
	if err := VerifyRendered(before, after, namespace, edits); err != nil {
		return nil, err
	}
	c := &Change{Files: files, Before: before, After: after, Placed: placed}
	for _, f := range files {
		old := File{Path: f.Path}
		if f.Path == original.Path {
			old = original
		}
		c.Old = append(c.Old, old)
	}
	return c, nil
}

// EditKustomization is the kustomization file k, edited in place so that
// the overlay renders edits on the objects it rendered (before), and the
// patch files it now names; placed is the file each edit went to. With
// mapped, images and replicas go through the kustomization's images: and
// replicas: (what kustomize edit set image and set replicas write);
// without, every edit is a patch.
func EditKustomization(k File, before []Document, namespace string, edits []Edit, session string, mapped bool) (files []File, placed []string, err error) {
	nodes, err := parse(k.Data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", k.Path, err)
	}
	if len(nodes) != 1 || len(nodes[0].Content) != 1 || nodes[0].Content[0].Kind != yaml.MappingNode {
		return nil, nil, fmt.Errorf("%w: %s is not one YAML mapping", ErrCannotPropose, k.Path)
	}
	kz := nodes[0].Content[0]
	dir := path.Dir(k.Path)
	var (
		modify  []textEdit
		added   = map[string][]*yaml.Node{} // new items of images, replicas, patches
		patches []*targetPatch
		images  = map[string]string{} // the image each item now names
	)
	for _, e := range edits {
		obj := renderedObject(before, e.Target, namespace)
		if obj == nil {
			return nil, nil, &NotRendered{Why: fmt.Sprintf("the overlay %s renders no %s", dir, e.Target)}
		}
		was, found := audit.Lookup(obj, e.Path)
		if found && !e.Delete && Same(normalise(was), normalise(e.Value)) {
			placed = append(placed, "") // the overlay renders it already
			continue
		}
		if mapped {
			if entry, ok := imageEntry(kz, e, was); ok {
				// Containers that ran one image and now run another
				// share an item; two new images for it cannot.
				key := strconv.Itoa(entry) + " " + parseImage(was.(string)).name
				if prior, seen := images[key]; seen {
					if prior != e.Value {
						return nil, nil, fmt.Errorf("%w: containers that ran %s now run %s and %s: images: cannot say both", ErrCannotPropose, was, prior, e.Value)
					}
					placed = append(placed, k.Path)
					continue
				}
				images[key] = e.Value.(string)
				tes, item, err := setImage(k.Data, kz, entry, e.Value.(string), was.(string))
				if err != nil {
					return nil, nil, err
				}
				modify = append(modify, tes...)
				if item != nil {
					added["images"] = append(added["images"], item)
				}
				placed = append(placed, k.Path)
				continue
			}
			if count, ok := replicaCount(e); ok {
				base := baseName(kz, e.Target.Name)
				if _, v := mappingEntry(kz, "replicas"); v != nil && hasNamed(v, base) {
					te, err := editNode(k.Data, nodes[0], Edit{Path: "/replicas/" + pointerEscape(base) + "/count", Value: count})
					if err != nil {
						return nil, nil, fmt.Errorf("%s: %w", k.Path, err)
					}
					modify = append(modify, te)
				} else {
					added["replicas"] = append(added["replicas"], orderedMap("name", base, "count", count))
				}
				placed = append(placed, k.Path)
				continue
			}
		}
		p := patchFor(&patches, e.Target, path.Join(dir, patchFileName(session, e.Target)))
		if err := p.add(obj, e); err != nil {
			return nil, nil, err
		}
		placed = append(placed, p.file)
	}
	for _, p := range patches {
		target := []any{"kind", p.target.Kind, "name", baseName(kz, p.target.Name)}
		if p.target.Group != "" {
			target = append([]any{"group", p.target.Group}, target...)
		}
		added["patches"] = append(added["patches"], orderedMap("path", path.Base(p.file), "target", orderedMap(target...)))
		data, err := p.content()
		if err != nil {
			return nil, nil, err
		}
		files = append(files, File{Path: p.file, Data: data})
	}
	// Items go at the end of their lists, and lists the kustomization
	// lacks at its end: after the items, where both land on one offset.
	lines := lineStarts(k.Data)
	var keys []textEdit
	for _, key := range []string{"images", "replicas", "patches"} {
		if len(added[key]) == 0 {
			continue
		}
		te, err := appendItems(k.Data, lines, kz, key, added[key])
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", k.Path, key, err)
		}
		if mappingHas(kz, key) {
			modify = append(modify, te)
		} else {
			keys = append(keys, te)
		}
	}
	modify = append(modify, keys...)
	data, err := applyText(k.Data, modify)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", k.Path, err)
	}
	return append([]File{{Path: k.Path, Data: data}}, files...), placed, nil
}

// renderedObject is the object t among docs.
func renderedObject(docs []Document, t audit.Target, namespace string) map[string]any {
	for _, d := range docs {
		if d.Matches(t, namespace) {
			return d.Object
		}
	}
	return nil
}

// imageEntry is the item of the kustomization's images: that the edit of
// a container's image goes through: the one whose output name is the
// image's name where the overlay renders it now (-1 for a new item), and
// false when the edit is no image or cannot be written as one (an image
// with neither tag nor digest).
func imageEntry(kz *yaml.Node, e Edit, was any) (int, bool) {
	segs := redact.Segments(e.Path)
	n := len(segs)
	old, isString := was.(string)
	live, liveString := e.Value.(string)
	if e.Delete || n < 3 || segs[n-1] != "image" || segs[n-3] != "containers" && segs[n-3] != "initContainers" || !isString || !liveString {
		return 0, false
	}
	if ref := parseImage(live); ref.tag == "" && ref.digest == "" {
		return 0, false
	}
	_, images := mappingEntry(kz, "images")
	if images == nil || images.Kind != yaml.SequenceNode {
		return -1, true
	}
	for i, item := range images.Content {
		_, name := mappingEntry(item, "name")
		_, newName := mappingEntry(item, "newName")
		out := ""
		if name != nil {
			out = name.Value
		}
		if newName != nil {
			out = newName.Value
		}
		if out == parseImage(old).name {
			return i, true
		}
	}
	return -1, true
}

// setImage makes images item entry (-1: a new item, returned) turn old
// into live: newName when the name changes, then newTag or digest, the
// other removed.
func setImage(data []byte, kz *yaml.Node, entry int, live, old string) ([]textEdit, *yaml.Node, error) {
	want, was := parseImage(live), parseImage(old)
	if entry < 0 {
		kv := []any{"name", was.name}
		if want.name != was.name {
			kv = append(kv, "newName", want.name)
		}
		if want.digest != "" {
			kv = append(kv, "digest", want.digest)
		} else {
			kv = append(kv, "newTag", want.tag)
		}
		return nil, orderedMap(kv...), nil
	}
	_, images := mappingEntry(kz, "images")
	item := images.Content[entry]
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{kz}}
	_, name := mappingEntry(item, "name")
	at := "/images/" + pointerEscape(name.Value) + "/"
	var out []textEdit
	set := func(key, value string) error {
		te, err := editNode(data, doc, Edit{Path: at + key, Value: value})
		out = append(out, te)
		return err
	}
	drop := func(key string) error {
		if _, v := mappingEntry(item, key); v == nil {
			return nil
		}
		te, err := editNode(data, doc, Edit{Path: at + key, Delete: true})
		out = append(out, te)
		return err
	}
	var errs []error
	if want.name != was.name || mappingHas(item, "newName") {
		errs = append(errs, set("newName", want.name))
	}
	if want.digest != "" {
		errs = append(errs, set("digest", want.digest), drop("newTag"))
	} else {
		errs = append(errs, set("newTag", want.tag), drop("digest"))
	}
	for _, err := range errs {
		if err != nil {
			return nil, nil, fmt.Errorf("images %s: %w", name.Value, err)
		}
	}
	return out, nil, nil
}

func mappingHas(m *yaml.Node, key string) bool {
	_, v := mappingEntry(m, key)
	return v != nil
}

// imageRef is an image reference split as kustomize's images: reads it.
type imageRef struct{ name, tag, digest string }

func parseImage(s string) imageRef {
	var r imageRef
	s, r.digest, _ = strings.Cut(s, "@")
	if i := strings.LastIndex(s, ":"); i > strings.LastIndex(s, "/") {
		s, r.tag = s[:i], s[i+1:]
	}
	r.name = s
	return r
}

// replicaKinds are the kinds kustomize's replicas: sets.
var replicaKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "ReplicaSet": true, "ReplicationController": true}

// replicaCount is the count of an edit of spec.replicas that replicas:
// can write.
func replicaCount(e Edit) (int64, bool) {
	if e.Delete || e.Path != "/spec/replicas" || !replicaKinds[e.Target.Kind] {
		return 0, false
	}
	switch v := e.Value.(type) {
	case int64:
		return v, true
	case int:
		return int64(v), true
	case float64:
		return int64(v), v == float64(int64(v))
	}
	return 0, false
}

// baseName is name as the overlay's own resources spell it: without the
// namePrefix and nameSuffix the kustomization adds (replicas: and patch
// targets name objects before those apply).
func baseName(kz *yaml.Node, name string) string {
	if _, p := mappingEntry(kz, "namePrefix"); p != nil && p.Kind == yaml.ScalarNode {
		name = strings.TrimPrefix(name, p.Value)
	}
	if _, s := mappingEntry(kz, "nameSuffix"); s != nil && s.Kind == yaml.ScalarNode {
		name = strings.TrimSuffix(name, s.Value)
	}
	return name
}

// hasNamed is whether sequence s has an item whose name is name.
func hasNamed(s *yaml.Node, name string) bool {
	if s.Kind != yaml.SequenceNode {
		return false
	}
	for _, item := range s.Content {
		if _, v := mappingEntry(item, "name"); v != nil && v.Value == name {
			return true
		}
	}
	return false
}

// orderedMap is a YAML mapping of the key-value pairs kv, in that order.
func orderedMap(kv ...any) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode}
	for i := 0; i+1 < len(kv); i += 2 {
		var k, v yaml.Node
		_ = k.Encode(kv[i])
		if n, ok := kv[i+1].(*yaml.Node); ok {
			v = *n
		} else {
			_ = v.Encode(kv[i+1])
		}
		m.Content = append(m.Content, &k, &v)
	}
	return m
}

// marshal is v as YAML indented by two spaces, as kustomizations are.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	err := enc.Close()
	return buf.Bytes(), err
}

func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// appendItems adds items at the end of the block sequence at key of
// mapping m, in the indentation its items have, or the key with them
// when m has none.
func appendItems(data []byte, lines []int, m *yaml.Node, key string, items []*yaml.Node) (textEdit, error) {
	_, seq := mappingEntry(m, key)
	if seq == nil {
		list := make([]any, len(items))
		for i, it := range items {
			list[i] = it
		}
		return addKeys(data, lines, m, []string{key}, list)
	}
	if seq.Kind != yaml.SequenceNode || seq.Style&yaml.FlowStyle != 0 || len(seq.Content) == 0 {
		return textEdit{}, fmt.Errorf("%w: it is not a list written one item a line", ErrCannotPropose)
	}
	first := seq.Content[0]
	lead := string(data[lines[first.Line-1]:offset(lines, first.Line, first.Column)])
	dash := strings.LastIndex(lead, "-")
	if dash < 0 || strings.TrimSpace(lead[:dash]) != "" {
		return textEdit{}, fmt.Errorf("%w: its first item does not start its line", ErrCannotPropose)
	}
	var text strings.Builder
	for _, it := range items {
		b, err := marshal(it)
		if err != nil {
			return textEdit{}, err
		}
		for i, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if i == 0 {
				text.WriteString(strings.Repeat(" ", dash) + "- " + l + "\n")
			} else {
				text.WriteString(strings.Repeat(" ", dash+2) + l + "\n")
			}
		}
	}
	at := subtreeEnd(data, lines, seq, dash)
	if at == len(data) && at > 0 && data[at-1] != '\n' {
		return textEdit{from: at, to: at, text: "\n" + strings.TrimSuffix(text.String(), "\n")}, nil
	}
	return textEdit{from: at, to: at, text: text.String()}, nil
}

// targetPatch is the JSON 6902 patch of one object a proposal adds to an
// overlay.
type targetPatch struct {
	target audit.Target
	file   string
	ops    []patchOp
}

type patchOp struct {
	Op    string `yaml:"op"`
	Path  string `yaml:"path"`
	Value any    `yaml:"value,omitempty"`
}

// patchFor is the patch of t among patches, added when there is none.
func patchFor(patches *[]*targetPatch, t audit.Target, file string) *targetPatch {
	for _, p := range *patches {
		if p.target == t {
			return p
		}
	}
	p := &targetPatch{target: t, file: file}
	*patches = append(*patches, p)
	return p
}

// add is the operation that makes obj (the object as the overlay renders
// it) hold e: the path is turned into list indexes, replace where the
// field is there (add for an object's key, which sets it too), add of the
// missing part where it is not, remove for a deletion.
func (p *targetPatch) add(obj map[string]any, e Edit) error {
	var ptr []string
	var cur any = obj
	segs := redact.Segments(e.Path)
	for i, seg := range segs {
		switch t := cur.(type) {
		case map[string]any:
			v, ok := t[seg]
			if !ok {
				if e.Delete {
					return fmt.Errorf("%w: the overlay does not render %s %s, yet it is to be removed", ErrCannotPropose, e.Target, e.Path)
				}
				var value any = e.Value
				for j := len(segs) - 1; j > i; j-- {
					value = map[string]any{segs[j]: value}
				}
				p.ops = append(p.ops, patchOp{Op: "add", Path: "/" + strings.Join(append(ptr, pointerEscape(seg)), "/"), Value: value})
				return nil
			}
			ptr, cur = append(ptr, pointerEscape(seg)), v
		case []any:
			index := -1
			if audit.Named(t) {
				for j, item := range t {
					if item.(map[string]any)["name"] == seg {
						index = j
					}
				}
			} else if n, err := strconv.Atoi(seg); err == nil && n >= 0 && n < len(t) {
				index = n
			}
			if index < 0 {
				return fmt.Errorf("%w: %s %s names a list item the overlay does not render", ErrCannotPropose, e.Target, e.Path)
			}
			ptr, cur = append(ptr, strconv.Itoa(index)), t[index]
		default:
			return fmt.Errorf("%w: %s %s goes through a value that is not an object", ErrCannotPropose, e.Target, e.Path)
		}
	}
	op := patchOp{Op: "replace", Path: "/" + strings.Join(ptr, "/"), Value: e.Value}
	if e.Delete {
		op = patchOp{Op: "remove", Path: op.Path}
	}
	p.ops = append(p.ops, op)
	return nil
}

// content is the patch file's content: a comment saying where it comes
// from, then the operations.
func (p *targetPatch) content() ([]byte, error) {
	b, err := marshal(p.ops)
	if err != nil {
		return nil, err
	}
	head := fmt.Sprintf("# The live fix of a break-glass session on %s, proposed by kubectl gitops.\n", p.target)
	return append([]byte(head), b...), nil
}

var unsafeName = regexp.MustCompile(`[^a-z0-9.-]+`)

// patchFileName is the file of session's patch of t, in the overlay.
func patchFileName(session string, t audit.Target) string {
	return unsafeName.ReplaceAllString(strings.ToLower("kubectl-gitops-"+session+"-"+t.Kind+"-"+t.Name), "-") + ".yaml"
}

// LocalKustomization refuses a kustomization at dir (slash-separated,
// relative to root) that reaches beyond root: a resource, base or
// component that is a URL or a remote repository, or a path outside the
// checkout, in it or in any local kustomization it includes. kustomize
// fetches those with no deadline; the controller, one worker for every
// session, must not wait on a server an Application's author chose.
func LocalKustomization(root, dir string) error {
	seen := map[string]bool{}
	var walk func(dir string) error
	walk = func(dir string) error {
		if seen[dir] {
			return nil
		}
		seen[dir] = true
		name := kustomizationFile(dir)
		if name == "" {
			return nil // a directory of plain resources
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		var k struct {
			Resources  []string `yaml:"resources"`
			Bases      []string `yaml:"bases"`
			Components []string `yaml:"components"`
		}
		if err := yaml.Unmarshal(data, &k); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCannotPropose, name, err)
		}
		where, _ := filepath.Rel(root, dir)
		for _, entry := range append(append(k.Resources, k.Bases...), k.Components...) {
			target := filepath.Join(dir, filepath.FromSlash(entry))
			rel, err := filepath.Rel(root, target)
			_, statErr := os.Stat(target)
			if strings.Contains(entry, "://") || err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || statErr != nil {
				return fmt.Errorf("%w: the kustomization in %s names %q, which is not a file or directory of the repository (a remote resource or base): the controller fetches nothing from elsewhere; propose it with %s", ErrCannotPropose, filepath.ToSlash(where), redact.Text(entry), next.ProposeAny())
			}
			if info, err := os.Stat(target); err == nil && info.IsDir() {
				if err := walk(target); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(filepath.Join(root, filepath.FromSlash(dir)))
}
