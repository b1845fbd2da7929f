package breakglass

import (
	"errors"
	"strings"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/internal/jsontest"
)

func TestPatchSpecBuild(t *testing.T) {
	three := int32(3)
	negative := int32(-1)
	tests := []struct {
		name     string
		spec     PatchSpec
		wantType string
		wantBody string
		wantErr  string
		input    argocd.Input
	}{
		{"image shortcut", PatchSpec{Images: map[string]string{"web": "r/web:2", "side": "r/side:1"}}, "strategic",
			`{"spec":{"template":{"spec":{"containers":[{"image":"r/side:1","name":"side"},{"image":"r/web:2","name":"web"}]}}}}`, "", ""},
		{"replicas shortcut", PatchSpec{Replicas: &three}, "strategic", `{"spec":{"replicas":3}}`, "", ""},
		{"yaml body", PatchSpec{Type: "merge", Body: "spec:\n  replicas: 4\n"}, "merge", `{"spec":{"replicas":4}}`, "", ""},
		{"json patch", PatchSpec{Type: "json", Body: `[{"op":"replace","path":"/spec/replicas","value":2}]`}, "json", `[{"op":"replace","path":"/spec/replicas","value":2}]`, "", ""},
		{"default type", PatchSpec{Body: `{"spec":{}}`}, "strategic", `{"spec":{}}`, "", ""},
		{"nothing", PatchSpec{}, "", "", "none given", InputChange},
		{"both ways", PatchSpec{Body: "{}", Replicas: &three}, "", "", "cannot be combined", InputChange},
		{"negative replicas", PatchSpec{Replicas: &negative}, "", "", "must be zero or more", InputReplicas},
		{"bad type", PatchSpec{Type: "apply", Body: "{}"}, "", "", `patch type "apply"`, InputPatchType},
		{"malformed", PatchSpec{Body: "{bad"}, "", "", "the patch is", ""},
		{"json patch object", PatchSpec{Type: "json", Body: `{"spec":{}}`}, "", "", "is an array of operations", InputPatch},
		{"array for merge", PatchSpec{Type: "merge", Body: `[1]`}, "", "", "set the patch type to json", InputPatch},
		{"scalar", PatchSpec{Body: `42`}, "", "", "must be a JSON object", InputPatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			typ, body, err := tt.spec.Build()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				// The engine names inputs, never flags: the plugin spells them.
				var input *argocd.InputError
				if strings.Contains(err.Error(), "--") || tt.input != "" && (!errors.As(err, &input) || input.Input != tt.input || !errors.Is(err, ErrPatchInvalid)) {
					t.Errorf("error %v: want an argocd.InputError for %q, naming no flag", err, tt.input)
				}
				return
			}
			if err != nil || typ != tt.wantType || string(body) != tt.wantBody {
				t.Errorf("got %s %s %v, want %s %s", typ, body, err, tt.wantType, tt.wantBody)
			}
		})
	}
}

func TestParseImages(t *testing.T) {
	if got, err := ParseImages([]string{"web=r/web:1", "side=r/s@sha256:ab"}); err != nil || got["side"] != "r/s@sha256:ab" {
		t.Errorf("ParseImages: %v %v", got, err)
	}
	for _, bad := range [][]string{{"web"}, {"=img"}, {"web="}, {"web=a", "web=b"}} {
		if _, err := ParseImages(bad); err == nil {
			t.Errorf("ParseImages(%q) accepted", bad)
		}
	}
}

func TestImagePatchRefusesUnknownContainers(t *testing.T) {
	live := jsontest.Decode(t, `{"spec":{"template":{"spec":{"initContainers":[{"name":"migrate","image":"m:1"}],"containers":[{"name":"web","image":"w:1"},{"name":"oauth2-proxy","image":"p:1"}]}}}}`)
	_, err := PatchSpec{Images: map[string]string{"wbe": "w:2"}}.imagePatch(deployment, live)
	if !errors.Is(err, ErrPatchInvalid) || !strings.Contains(err.Error(), "wbe") || !strings.Contains(err.Error(), "web, oauth2-proxy") || !strings.Contains(err.Error(), "migrate (init)") {
		t.Fatalf("unknown container: %v", err)
	}
	body, err := PatchSpec{Images: map[string]string{"web": "w:2", "migrate": "m:2"}}.imagePatch(deployment, live)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"spec":{"template":{"spec":{"containers":[{"image":"w:2","name":"web"}],"initContainers":[{"image":"m:2","name":"migrate"}]}}}}`
	if string(body) != want {
		t.Errorf("image patch = %s, want %s", body, want)
	}
	cron := jsontest.Decode(t, `{"spec":{"jobTemplate":{"spec":{"template":{"spec":{"containers":[{"name":"job","image":"j:1"}]}}}}}}`)
	if body, err := (PatchSpec{Images: map[string]string{"job": "j:2"}}).imagePatch(audit.Target{Group: "batch", Kind: "CronJob", Name: "c"}, cron); err != nil || !strings.Contains(string(body), "jobTemplate") {
		t.Errorf("cronjob image patch = %s, %v", body, err)
	}
	if _, err := (PatchSpec{Images: map[string]string{"x": "y"}}).imagePatch(audit.Target{Kind: "ConfigMap", Name: "c"}, jsontest.Decode(t, `{"data":{}}`)); !errors.Is(err, ErrPatchInvalid) {
		t.Errorf("--image on a ConfigMap: %v", err)
	}
}
