package proposal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// maxTries bounds the renders spent looking for the value behind one
// field: past it, the field is set by hand.
const maxTries = 16

// helmChange writes each edit into the value of the chart's value files
// that renders it, in the file that wins for that value (the last of
// spec.source.helm.valueFiles that sets it, else the chart's
// values.yaml). Which value that is, is not guessed: a value is taken
// only when rendering the chart with it changed changes exactly that
// field to the live value and nothing else, as helm template renders it
// for Argo CD. A field no one value proves is refused, saying so.
func helmChange(ctx context.Context, root string, src Source, app App, edits []Edit) (*Change, error) {
	r, err := newHelmRenderer(root, src, app)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(r.home)
	chain, err := r.valueFiles()
	if err != nil {
		return nil, err
	}
	before, err := r.render(ctx, nil)
	if err != nil {
		return nil, err
	}
	leaves, err := valueLeaves(chain)
	if err != nil {
		return nil, err
	}
	var chosen []valueEdit
	for _, e := range edits {
		v, err := r.prove(ctx, chain, leaves, before, e)
		if err != nil {
			return nil, err
		}
		chosen = append(chosen, v)
	}
	files, err := editValues(chain, chosen)
	if err != nil {
		return nil, err
	}
	after, err := r.render(ctx, files)
	if err != nil {
		return nil, err
	}
	if err := VerifyRendered(before, after, r.namespace, edits); err != nil {
		return nil, err
	}
	c := &Change{Files: files, Before: before, After: after}
	for _, f := range files {
		c.Old = append(c.Old, fileNamed(chain, f.Path))
	}
	for _, v := range chosen {
		c.Placed = append(c.Placed, v.file)
	}
	return c, nil
}

// helmRenderer runs helm template on one chart as Argo CD's repo-server
// does for the Application.
type helmRenderer struct {
	helm, root, chart  string
	release, namespace string
	opts               HelmOptions
	home               string
	inline             string
}

func newHelmRenderer(root string, src Source, app App) (*helmRenderer, error) {
	helm, err := exec.LookPath("helm")
	if err != nil {
		return nil, fmt.Errorf("%w: the Application renders a Helm chart, and proving which value yields each field takes rendering it with helm, which is not on PATH: install helm (the version Argo CD runs) or make the change by hand", ErrCannotPropose)
	}
	r := &helmRenderer{helm: helm, root: root, chart: src.Path, release: src.Helm.ReleaseName, namespace: src.Helm.Namespace, opts: src.Helm}
	if r.release == "" {
		r.release = app.Name
	}
	if r.namespace == "" {
		r.namespace = app.Namespace
	}
	// helm keeps a cache and repositories under HOME: a scratch one keeps
	// the user's untouched and the render free of their repositories.
	if r.home, err = os.MkdirTemp("", "kubectl-gitops-helm-"); err != nil {
		return nil, err
	}
	if r.opts.Values != "" {
		r.inline = filepath.Join(r.home, "values.yaml")
		if err := os.WriteFile(r.inline, []byte(r.opts.Values), 0o600); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// valueFiles are the chart's value files helm reads, in order: its
// values.yaml, then spec.source.helm.valueFiles, each a later one winning.
func (r *helmRenderer) valueFiles() ([]File, error) {
	var chain []File
	if f, err := readFile(r.root, path.Join(r.chart, "values.yaml")); err == nil {
		chain = append(chain, f)
	}
	for _, name := range r.opts.ValueFiles {
		p := path.Join(r.chart, name)
		if p == ".." || strings.HasPrefix(p, "../") {
			return nil, fmt.Errorf("%w: the value file %s is outside the repository", ErrCannotPropose, name)
		}
		f, err := readFile(r.root, p)
		switch {
		case errors.Is(err, os.ErrNotExist) && r.opts.IgnoreMissing:
			continue
		case err != nil:
			return nil, fmt.Errorf("%w: reading the value file %s: %v", ErrCannotPropose, name, err)
		}
		chain = append(chain, f)
	}
	return chain, nil
}

// render is helm template of the chart with files written over the
// checkout: the flags Argo CD passes for the Application's
// spec.source.helm.
func (r *helmRenderer) render(ctx context.Context, files []File) (docs []Document, err error) {
	args := []string{"template", ".", "--name-template", r.release, "--namespace", r.namespace}
	for _, f := range r.opts.ValueFiles {
		p := filepath.Join(r.root, filepath.FromSlash(path.Join(r.chart, f)))
		if _, err := os.Stat(p); err != nil && r.opts.IgnoreMissing {
			continue
		}
		args = append(args, "--values", p)
	}
	if r.inline != "" {
		args = append(args, "--values", r.inline)
	}
	for _, p := range r.opts.Parameters {
		flag := "--set"
		if p.ForceString {
			flag = "--set-string"
		}
		args = append(args, flag, p.Name+"="+setValue(p.Value))
	}
	if !r.opts.SkipCRDs {
		args = append(args, "--include-crds")
	}
	if r.opts.SkipSchemaValidation {
		args = append(args, "--skip-schema-validation")
	}
	if r.opts.SkipTests {
		args = append(args, "--skip-tests")
	}
	if r.opts.KubeVersion != "" {
		args = append(args, "--kube-version", r.opts.KubeVersion)
	}
	for _, v := range r.opts.APIVersions {
		args = append(args, "--api-versions", v)
	}
	err = withFiles(r.root, files, func() error {
		cmd := exec.CommandContext(ctx, r.helm, args...)
		cmd.Dir = filepath.Join(r.root, filepath.FromSlash(r.chart))
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(r.home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(r.home, "config"), "HELM_DATA_HOME="+filepath.Join(r.home, "data"))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%w: helm template %s: %v: %s", ErrCannotPropose, r.chart, err, strings.TrimSpace(stderr.String()))
		}
		docs, err = Rendered("helm template "+r.chart, stdout.Bytes())
		return err
	})
	return docs, err
}

// setValue is a parameter's value as Argo CD passes it to --set: a comma
// not already escaped is escaped (helm would split the value there),
// unless the value is a {…} list.
func setValue(v string) string {
	if strings.HasPrefix(v, "{") && strings.HasSuffix(v, "}") {
		return v
	}
	var b strings.Builder
	var prev rune
	for _, r := range v {
		if r == ',' && prev != '\\' {
			b.WriteString(`\,`)
		} else {
			b.WriteRune(r)
		}
		prev = r
	}
	return b.String()
}

// valueLeaf is a scalar of a value file: the one that wins for its key.
type valueLeaf struct {
	file  string
	path  string // a JSON pointer, list items by name where they have one
	node  *yaml.Node
	value any
}

// valueLeaves are the scalars of the value files, each key's from the
// file that wins for it (the last that sets it), in a stable order.
func valueLeaves(chain []File) ([]valueLeaf, error) {
	won := map[string]valueLeaf{}
	for _, f := range chain {
		docs, err := parse(f.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		if len(docs) == 0 {
			continue
		}
		walkLeaves(docs[0], "", func(p string, n *yaml.Node) {
			var v any
			if n.Decode(&v) == nil {
				won[p] = valueLeaf{file: f.Path, path: p, node: n, value: v}
			}
		})
	}
	var out []valueLeaf
	for _, l := range won {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out, nil
}

// walkLeaves calls fn with every scalar under n and its path.
func walkLeaves(n *yaml.Node, at string, fn func(string, *yaml.Node)) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			walkLeaves(c, at, fn)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			walkLeaves(n.Content[i+1], at+"/"+pointerEscape(n.Content[i].Value), fn)
		}
	case yaml.SequenceNode:
		named := len(n.Content) > 0
		for _, item := range n.Content {
			if _, v := mappingEntry(item, "name"); item.Kind != yaml.MappingNode || v == nil || v.Kind != yaml.ScalarNode {
				named = false
			}
		}
		for i, item := range n.Content {
			seg := strconv.Itoa(i)
			if named {
				_, v := mappingEntry(item, "name")
				seg = pointerEscape(v.Value)
			}
			walkLeaves(item, at+"/"+seg, fn)
		}
	case yaml.ScalarNode:
		if n.Tag != "!!null" {
			fn(at, n)
		}
	}
}

// valueEdit is a value of a value file set to a new value.
type valueEdit struct {
	file, path string
	value      any
}

// prove finds the one value whose change renders e and nothing else: a
// value that renders as the field does now (set to the live value), or
// one that is part of it (the tag of an image, set to the live part).
func (r *helmRenderer) prove(ctx context.Context, chain []File, leaves []valueLeaf, before []Document, e Edit) (valueEdit, error) {
	obj := renderedObject(before, e.Target, r.namespace)
	if obj == nil {
		return valueEdit{}, &NotRendered{Why: fmt.Sprintf("the chart %s renders no %s", r.chart, e.Target)}
	}
	was, found := audit.Lookup(obj, e.Path)
	if found && !e.Delete && Same(normalise(was), normalise(e.Value)) {
		return valueEdit{}, nil // the chart renders it already
	}
	if !found || e.Delete || !isScalar(e.Value) || !isScalar(was) {
		return valueEdit{}, fmt.Errorf("%w: %s %s is not a single value the chart renders (it adds, removes or reshapes a field), so no value of the chart is proven to yield it: make this change by hand", ErrCannotPropose, e.Target, e.Path)
	}
	cands := candidates(leaves, was, e.Value)
	var tried []string
	for _, c := range cands {
		if len(tried) == maxTries {
			break
		}
		tried = append(tried, c.file+" "+c.path)
		files, err := editValues(chain, []valueEdit{c})
		if err != nil {
			continue
		}
		after, err := r.render(ctx, files)
		if err != nil {
			continue
		}
		if VerifyRendered(before, after, r.namespace, []Edit{e}) == nil {
			return c, nil
		}
	}
	why := "no value of the chart's value files renders as it does now"
	if len(tried) > 0 {
		why = "changing " + strings.Join(tried, ", ") + " did not render that change alone"
	}
	return valueEdit{}, fmt.Errorf("%w: no single value of the chart's value files is proven to yield %s %s (%s): the chart computes it from several values, or the Application's spec.source.helm sets it; make this change by hand", ErrCannotPropose, e.Target, e.Path, why)
}

// candidates are the values that may render was, with the value each
// would take to render live: those that render as was whole first, then
// those that are one part of it (the longest first).
func candidates(leaves []valueLeaf, was, live any) []valueEdit {
	var whole, part []valueEdit
	var partLen []int
	wasText, liveText := fmt.Sprint(was), fmt.Sprint(live)
	_, liveString := live.(string)
	for _, l := range leaves {
		text := l.node.Value
		switch {
		case fmt.Sprint(l.value) == wasText:
			whole = append(whole, valueEdit{file: l.file, path: l.path, value: live})
		case liveString && text != "" && strings.Count(wasText, text) == 1:
			i := strings.Index(wasText, text)
			prefix, suffix := wasText[:i], wasText[i+len(text):]
			if len(liveText) < len(prefix)+len(suffix) || !strings.HasPrefix(liveText, prefix) || !strings.HasSuffix(liveText, suffix) {
				continue
			}
			part = append(part, valueEdit{file: l.file, path: l.path, value: liveText[len(prefix) : len(liveText)-len(suffix)]})
			partLen = append(partLen, len(text))
		}
	}
	idx := make([]int, len(part))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return partLen[idx[a]] > partLen[idx[b]] })
	for _, i := range idx {
		whole = append(whole, part[i])
	}
	return whole
}

// editValues is the value files edited in place, one text edit a value.
// Two edits of one value must agree.
func editValues(chain []File, edits []valueEdit) ([]File, error) {
	var pending fileEdits
	seen := map[string]any{}
	for _, v := range edits {
		if v.file == "" {
			continue
		}
		key := v.file + " " + v.path
		if prior, ok := seen[key]; ok {
			if !Same(normalise(prior), normalise(v.value)) {
				return nil, fmt.Errorf("%w: two fields need %s of %s to be both %v and %v", ErrCannotPropose, v.path, v.file, prior, v.value)
			}
			continue
		}
		seen[key] = v.value
		f := fileNamed(chain, v.file)
		docs, err := parse(f.Data)
		if err != nil {
			return nil, err
		}
		te, err := editNode(f.Data, docs[0], Edit{Path: v.path, Value: v.value})
		if err != nil {
			return nil, fmt.Errorf("%s in %s: %w", v.path, v.file, err)
		}
		pending.add(v.file, te)
	}
	return pending.apply(chain)
}
