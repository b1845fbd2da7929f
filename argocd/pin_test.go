package argocd

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func pinApp(t *testing.T, edit func(spec map[string]any)) App {
	t.Helper()
	spec := map[string]any{
		"project":     "default",
		"source":      map[string]any{"repoURL": "https://git.example/apps.git", "path": "apps/web", "targetRevision": "main", "helm": map[string]any{"parameters": []any{map[string]any{"name": "image.tag", "value": "1.0"}}}},
		"destination": map[string]any{"server": InClusterServer, "namespace": "demo"},
		"syncPolicy":  map[string]any{"automated": map[string]any{"selfHeal": true}},
	}
	if edit != nil {
		edit(spec)
	}
	return App{&unstructured.Unstructured{Object: map[string]any{"spec": spec}}}
}

func unchangedText(s string) string { return s }

// TestPinChanges: a session's pin names each repointing in words, sees
// option changes by the digest alone, and ignores what it does not pin.
func TestPinChanges(t *testing.T) {
	pinned := pinApp(t, nil).Pin(unchangedText)
	for name, tc := range map[string]struct {
		edit func(spec map[string]any)
		want string // "" for no change
	}{
		"nothing":                 {func(map[string]any) {}, ""},
		"the sync policy":         {func(s map[string]any) { s["syncPolicy"] = map[string]any{} }, ""},
		"a side branch":           {func(s map[string]any) { s["source"].(map[string]any)["targetRevision"] = "hotfix" }, `the source's targetRevision changed from "main" to "hotfix"`},
		"another path":            {func(s map[string]any) { s["source"].(map[string]any)["path"] = "apps/web-fixed" }, `the source's path changed from "apps/web" to "apps/web-fixed"`},
		"a Helm parameter":        {func(s map[string]any) { s["source"].(map[string]any)["helm"] = map[string]any{} }, "the sources' options changed"},
		"another namespace":       {func(s map[string]any) { s["destination"].(map[string]any)["namespace"] = "other" }, `spec.destination.namespace changed from "demo" to "other"`},
		"another project":         {func(s map[string]any) { s["project"] = "team-a" }, `spec.project changed from "default" to "team-a"`},
		"several sources":         {func(s map[string]any) { s["sources"] = []any{s["source"], s["source"]}; delete(s, "source") }, "the sources changed from 1 to 2"},
		"an unknown source field": {func(s map[string]any) { s["source"].(map[string]any)["newerArgoField"] = true }, "the sources' options changed"},
	} {
		got := strings.Join(PinChanges(pinned, pinApp(t, tc.edit).Pin(unchangedText)), "; ")
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q; want %q", name, got, tc.want)
		}
	}
}

// TestPinKeepsNoCredentials: a repository URL's credentials are taken
// out by the caller's cleaner; values never reach the pin, only its digest.
func TestPinKeepsNoCredentials(t *testing.T) {
	app := pinApp(t, func(s map[string]any) {
		s["source"].(map[string]any)["repoURL"] = "https://user:hunter2@git.example/apps.git"
	})
	pin := app.Pin(func(s string) string { return strings.ReplaceAll(s, "hunter2", "[REDACTED]") })
	if strings.Contains(pin.Sources[0].RepoURL, "hunter2") {
		t.Errorf("pinned repoURL %q keeps the password", pin.Sources[0].RepoURL)
	}
	if strings.Contains(strings.Join([]string{pin.Sources[0].Path, pin.Sources[0].TargetRevision}, ""), "1.0") {
		t.Errorf("a Helm value reached the pin: %+v", pin)
	}
}
