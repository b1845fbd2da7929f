package argocd

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/internal/jsontest"
)

func TestSourceNamesWhereTheChangeBelongs(t *testing.T) {
	app := func(spec, status string) App {
		return App{&unstructured.Unstructured{Object: map[string]any{"spec": jsontest.Decode(t, spec), "status": jsontest.Decode(t, status)}}}
	}
	for _, tt := range []struct {
		name         string
		spec, status string
		want         Source
	}{
		{"one source", `{"source":{"repoURL":"r","path":"apps/web","targetRevision":"main"}}`, `{"sourceType":"Kustomize"}`,
			Source{RepoURL: "r", Path: "apps/web", TargetRevision: "main", Type: "Kustomize"}},
		{"a chart with values in a ref source", `{"sources":[
			{"repoURL":"https://charts.example","chart":"web","targetRevision":"1.2.0","helm":{"valueFiles":["$values/envs/prod.yaml","values.yaml"]}},
			{"repoURL":"https://git.example/values","targetRevision":"main","ref":"values"}]}`, `{"sourceTypes":["Helm",""]}`,
			Source{RepoURL: "https://charts.example", Chart: "web", TargetRevision: "1.2.0", Type: "Helm", Position: 1,
				ValueFiles: []Source{{RepoURL: "https://git.example/values", Path: "envs/prod.yaml", TargetRevision: "main"}}}},
		{"several rendering sources", `{"sources":[
			{"repoURL":"a","path":"base","targetRevision":"HEAD"},
			{"repoURL":"b","path":"extra","targetRevision":"v1","ref":"cfg"}]}`, `{"sourceTypes":["Directory","Kustomize"]}`,
			Source{RepoURL: "a", Path: "base", TargetRevision: "HEAD", Type: "Directory", Position: 1,
				Others: []Source{{RepoURL: "b", Path: "extra", TargetRevision: "v1", Type: "Kustomize", Position: 2}}}},
		{"source hydrator: the dry source", `{"sourceHydrator":{
			"drySource":{"repoURL":"r","path":"dry/web","targetRevision":"HEAD"},
			"syncSource":{"targetBranch":"env/prod","path":"web"},
			"hydrateTo":{"targetBranch":"env/prod-next"}}}`, `{"sourceType":"Directory"}`,
			Source{RepoURL: "r", Path: "dry/web", TargetRevision: "HEAD", HydratedBranch: "env/prod-next", HydratedPath: "web"}},
	} {
		if got := app(tt.spec, tt.status).Source(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

func TestGitAtFollowsTheRevisionAUserChanges(t *testing.T) {
	app := func(spec, status string) App {
		return App{&unstructured.Unstructured{Object: map[string]any{"spec": jsontest.Decode(t, spec), "status": jsontest.Decode(t, status)}}}
	}
	single := app(`{"source":{"repoURL":"r"}}`, `{"sync":{"revision":"aaa"}}`)
	multi := app(`{"sources":[{"repoURL":"r"},{"repoURL":"s"}]}`, `{"sync":{"revisions":["aaa","bbb"]}}`)
	hydrated := app(`{"sourceHydrator":{"drySource":{"repoURL":"r"}}}`,
		`{"sync":{"revision":"hhh"},"sourceHydrator":{"lastSuccessfulOperation":{"drySHA":"ddd","hydratedSHA":"hhh"}}}`)
	for _, tt := range []struct {
		app  App
		want audit.Git
	}{
		{single, audit.Git{Revision: "aaa"}},
		{multi, audit.Git{Revision: "aaa", Revisions: []string{"aaa", "bbb"}}},
		{hydrated, audit.Git{Revision: "ddd", Hydrated: "hhh"}},
	} {
		if got := tt.app.Git(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("gitAt = %+v, want %+v", got, tt.want)
		}
	}
	for _, tt := range []struct {
		then, now audit.Git
		moved     bool
	}{
		{audit.Git{Revision: "aaa"}, audit.Git{Revision: "aaa"}, false},
		{audit.Git{Revision: "aaa"}, audit.Git{Revision: "bbb"}, true},
		{audit.Git{Revision: "aaa"}, audit.Git{}, false},
		// A multi-source Application has no status.sync.revision: only the
		// second source moving is Git moving.
		{audit.Git{Revision: "aaa", Revisions: []string{"aaa", "bbb"}}, audit.Git{Revision: "aaa", Revisions: []string{"aaa", "ccc"}}, true},
		{audit.Git{Revision: "aaa", Revisions: []string{"aaa", "bbb"}}, audit.Git{Revision: "aaa", Revisions: []string{"aaa", "bbb"}}, false},
		// The hydrated commit moving without the dry one is not Git moving.
		{audit.Git{Revision: "ddd", Hydrated: "hhh"}, audit.Git{Revision: "ddd", Hydrated: "iii"}, false},
	} {
		if got := GitMoved(tt.then, tt.now); got != tt.moved {
			t.Errorf("GitMoved(%+v, %+v) = %v, want %v", tt.then, tt.now, got, tt.moved)
		}
	}
}
