package proposal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

const chartValues = `# Defaults of the web chart.
replicaCount: 2 # the floor
image:
  repository: registry.example/web
  tag: "1.0.0" # bumped by CI
env:
- name: MODE
  value: safe
- name: WORKERS
  value: "2"
`

const prodValues = `image:
  tag: 1.0.1 # prod runs ahead
`

// TestValueLeaves: each value's scalar comes from the file that wins for
// it, the last of the chain that sets it; lists of named items are
// spelled by name.
func TestValueLeaves(t *testing.T) {
	leaves, err := valueLeaves([]File{{"chart/values.yaml", []byte(chartValues)}, {"chart/values-prod.yaml", []byte(prodValues)}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range leaves {
		got = append(got, fmt.Sprintf("%s %s=%v", l.file, l.path, l.value))
	}
	want := []string{
		"chart/values.yaml /env/MODE/name=MODE",
		"chart/values.yaml /env/MODE/value=safe",
		"chart/values.yaml /env/WORKERS/name=WORKERS",
		"chart/values.yaml /env/WORKERS/value=2",
		"chart/values.yaml /image/repository=registry.example/web",
		"chart/values-prod.yaml /image/tag=1.0.1",
		"chart/values.yaml /replicaCount=2",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("leaves:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCandidates: the values that may render a field, in the order they
// are tried: those that render as the field whole (set to the live value)
// first, then those that are one part of it (set to the live part),
// longest first; a value whose part is not where the live value differs
// is no candidate.
func TestCandidates(t *testing.T) {
	leaves, err := valueLeaves([]File{{"chart/values.yaml", []byte(chartValues)}, {"chart/values-prod.yaml", []byte(prodValues)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		was, live any
		want      string
	}{
		{int64(2), int64(5), "chart/values.yaml /env/WORKERS/value=5 chart/values.yaml /replicaCount=5"},
		{"registry.example/web:1.0.1", "registry.example/web:hotfix", "chart/values-prod.yaml /image/tag=hotfix"},
		{"registry.example/web:1.0.1", "mirror.example/web:1.0.1", "chart/values.yaml /image/repository=mirror.example/web"},
		{"safe", "fast", "chart/values.yaml /env/MODE/value=fast"},
		{"nothing like it", "x", ""},
	} {
		var got []string
		for _, c := range candidates(leaves, tc.was, tc.live) {
			got = append(got, fmt.Sprintf("%s %s=%v", c.file, c.path, c.value))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%v -> %v: %v, want %s", tc.was, tc.live, got, tc.want)
		}
	}
}

// TestEditValues: a value is edited in place in its file, its comment
// and quoting kept; two fields that need one value to differ are refused.
func TestEditValues(t *testing.T) {
	chain := []File{{"chart/values.yaml", []byte(chartValues)}, {"chart/values-prod.yaml", []byte(prodValues)}}
	files, err := editValues(chain, []valueEdit{
		{file: "chart/values-prod.yaml", path: "/image/tag", value: "hotfix"},
		{file: "chart/values.yaml", path: "/replicaCount", value: int64(5)},
		{file: "chart/values.yaml", path: "/env/WORKERS/value", value: "4"},
		{file: "chart/values.yaml", path: "/replicaCount", value: int64(5)},
		{}, // a field the chart renders already
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"chart/values-prod.yaml": strings.Replace(prodValues, "tag: 1.0.1", "tag: hotfix", 1),
		"chart/values.yaml":      strings.Replace(strings.Replace(chartValues, "replicaCount: 2", "replicaCount: 5", 1), `value: "2"`, `value: "4"`, 1),
	}
	if len(files) != 2 {
		t.Fatalf("%d files edited, want 2", len(files))
	}
	for _, f := range files {
		if string(f.Data) != want[f.Path] {
			t.Errorf("%s:\n%s\nwant:\n%s", f.Path, f.Data, want[f.Path])
		}
	}
	_, err = editValues(chain, []valueEdit{{file: "chart/values.yaml", path: "/replicaCount", value: 5}, {file: "chart/values.yaml", path: "/replicaCount", value: 6}})
	if !errors.Is(err, ErrCannotPropose) || !strings.Contains(err.Error(), "both 5 and 6") {
		t.Errorf("two values for one key: %v", err)
	}
}

// TestHelmNeedsHelm: with no helm to render the chart, nothing about it is
// proven, and the refusal says so.
func TestHelmNeedsHelm(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	root := writeTree(t, map[string]string{"chart/Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\n", "chart/values.yaml": chartValues})
	_, err := Make(context.Background(), root, KindHelm, Source{Path: "chart"}, App{Name: "web", Namespace: "shop"}, []Edit{{Target: web, Path: "/spec/replicas", Value: int64(5)}}, "s1")
	if !errors.Is(err, ErrCannotPropose) || !strings.Contains(err.Error(), "helm, which is not on PATH") {
		t.Errorf("no helm: %v", err)
	}
}

// TestSourceOfHelm: spec.source.helm as the render reads it; valuesObject
// wins over values, as Argo CD has it.
func TestSourceOfHelm(t *testing.T) {
	helm := map[string]any{
		"releaseName":             "web-prod",
		"namespace":               "shop",
		"valueFiles":              []any{"values-prod.yaml", "values-eu.yaml"},
		"ignoreMissingValueFiles": true,
		"values":                  "a: 1\n",
		"valuesObject":            map[string]any{"b": int64(2)},
		"parameters":              []any{map[string]any{"name": "image.tag", "value": "2.0"}, map[string]any{"name": "port", "value": "80", "forceString": true}},
		"skipCrds":                true,
		"skipTests":               true,
		"skipSchemaValidation":    true,
		"kubeVersion":             "1.35.0",
		"apiVersions":             []any{"monitoring.coreos.com/v1"},
	}
	s := specSource(map[string]any{"source": map[string]any{"repoURL": "https://github.com/acme/deploy", "path": "chart", "helm": helm}})
	want := HelmOptions{ReleaseName: "web-prod", Namespace: "shop", ValueFiles: []string{"values-prod.yaml", "values-eu.yaml"}, IgnoreMissing: true,
		Values: "b: 2\n", Parameters: []HelmParameter{{Name: "image.tag", Value: "2.0"}, {Name: "port", Value: "80", ForceString: true}},
		SkipCRDs: true, SkipTests: true, SkipSchemaValidation: true, KubeVersion: "1.35.0", APIVersions: []string{"monitoring.coreos.com/v1"}}
	if fmt.Sprintf("%+v", s.Helm) != fmt.Sprintf("%+v", want) {
		t.Errorf("helm options:\n%+v\nwant:\n%+v", s.Helm, want)
	}
	for in, out := range map[string]string{`a,b`: `a\,b`, `a\,b`: `a\,b`, `{a,b}`: `{a,b}`, `plain`: `plain`} {
		if got := setValue(in); got != out {
			t.Errorf("setValue(%s) = %s, want %s", in, got, out)
		}
	}
}
