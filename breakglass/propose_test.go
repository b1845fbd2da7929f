package breakglass

import (
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/proposal"
)

// TestASourceOthersReadIsNamed: a source whose files another source
// reads as Helm value files ($REF/…) changes what that one renders too.
func TestASourceOthersReadIsNamed(t *testing.T) {
	values := proposal.Source{Position: 1, Ref: "values", Path: "values"}
	chart := proposal.Source{Position: 2, Path: "chart"}
	chart.Helm.ValueFiles = []string{"$values/prod.yaml"}
	if got := lentTo([]proposal.Source{values, chart}, values); got != "source 2" {
		t.Errorf("a ref read by source 2: %q", got)
	}
	if got := lentTo([]proposal.Source{values, chart}, chart); got != "" {
		t.Errorf("a source with no ref: %q", got)
	}
	unread := proposal.Source{Position: 1, Ref: "other"}
	if got := lentTo([]proposal.Source{unread, chart}, unread); got != "" {
		t.Errorf("a ref nobody reads: %q", got)
	}
}

// TestDriftNeverProposesASecret: a value goes into Git only when the audit
// log would keep it in the clear, no secret flag comes before it, and it
// does not replace Git's reference to a Secret.
func TestDriftNeverProposesASecret(t *testing.T) {
	deploy := audit.Target{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	container := func(c map[string]any) map[string]any {
		return map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{c}}}}}
	}
	live := container(map[string]any{"name": "web", "image": "registry.example/web:2", "args": []any{"--log-level=info", "--db-password", "hunter2"},
		"env": []any{map[string]any{"name": "DATABASE_URL", "value": "postgres://app:pw@db/shop"}, map[string]any{"name": "DB_CONN", "value": "hunter2"}}})
	for _, c := range []struct {
		f      DriftField
		secret bool
	}{
		{DriftField{Target: deploy, Path: "/spec/template/spec/containers/web/image"}, false},
		{DriftField{Target: deploy, Path: "/spec/replicas"}, false},
		{DriftField{Target: audit.Target{Version: "v1", Kind: "Secret", Namespace: "shop", Name: "db"}, Path: "/data/password"}, true},
		{DriftField{Target: deploy, Path: "/spec/template/spec/containers/web/args"}, true},
		{DriftField{Target: deploy, Path: "/spec/template/spec/containers/web/args/2"}, true},
		{DriftField{Target: deploy, Path: "/spec/template/spec/containers/web/env/DATABASE_URL"}, true},
		{DriftField{Target: deploy, Path: "/spec/template/spec/containers/web/env/DB_CONN/value",
			Git: map[string]any{"valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "db", "key": "conn"}}}}, true},
	} {
		v, _ := audit.Lookup(live, c.f.Path)
		if c.f.Path == "/spec/replicas" {
			v = int64(4)
		}
		if why := secretIn(c.f, v, live); (why != "") != c.secret {
			t.Errorf("%s %s = %v: %q, want secret %v", c.f.Target.Kind, c.f.Path, v, why, c.secret)
		}
	}
}
