// Package deploy holds the install manifests; its test keeps the
// kustomization (kubectl apply -k deploy/) installing every one of them.
package deploy

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// TestReviewerGroupIsTheTools: the audit-log policy, the reviewer role and
// the tool name one reviewer group; otherwise the engine refuses every
// reviewer the API server lets write a review, or verify counts none. And
// the groups the policy never lets repair the head are those repair-head
// refuses before it asks.
func TestReviewerGroupIsTheTools(t *testing.T) {
	for path, want := range map[string]string{
		"policy/audit-log.yaml": "request.userInfo.groups.exists(g, g == '" + audit.ReviewerGroup + "')\n",
		"rbac/reviewer.yaml":    "  name: " + audit.ReviewerGroup + "\n",
	} {
		check(t, path, want)
	}
	// The groups audit repair-head refuses up front are the policy's.
	quoted := make([]string, len(audit.HeadGuardedGroups))
	for i, g := range audit.HeadGuardedGroups {
		quoted[i] = "'" + g + "'"
	}
	check(t, "policy/audit-log.yaml", "  - name: guarded\n    expression: \"request.userInfo.groups.exists(g, g in ["+strings.Join(quoted, ", ")+"]) || variables.controller\"\n")
}

// check fails t unless the file at path holds want.
func check(t *testing.T, path, want string) {
	t.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), want) {
		t.Errorf("%s does not hold %q, which the tool's groups say", path, want)
	}
}

func TestKustomizationInstallsEveryManifest(t *testing.T) {
	var k struct {
		Resources []string `json:"resources"`
	}
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	var files []string
	documents := 0
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" || path == "kustomization.yaml" {
			return err
		}
		if strings.HasPrefix(filepath.ToSlash(path), "notifications/") {
			return nil // merged into the user's own argocd-notifications-cm, never applied whole
		}
		if strings.HasPrefix(filepath.ToSlash(path), "monitoring/") {
			return nil // the Prometheus Operator's rules, applied only where its CRD is
		}
		files = append(files, filepath.ToSlash(path))
		body, err := os.ReadFile(path)
		documents += strings.Count("\n"+string(body), "\nkind: ")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	listed := slices.Clone(k.Resources)
	slices.Sort(listed)
	slices.Sort(files)
	if !slices.Equal(listed, files) {
		t.Errorf("kustomization.yaml lists %v; deploy/ holds %v", listed, files)
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not on PATH (make require installs it): the kustomization is not rendered")
	}
	out, err := exec.Command(kubectl, "kustomize", ".").Output()
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/: %v", err)
	}
	if rendered := bytes.Count(append([]byte("\n"), out...), []byte("\nkind: ")); rendered != documents {
		t.Errorf("kubectl kustomize renders %d objects; the files hold %d", rendered, documents)
	}
}

// TestMirrorAlertsNameTheControllersMetrics: the alert rules watch the
// metrics the controller serves with --mirror, by their names.
func TestMirrorAlertsNameTheControllersMetrics(t *testing.T) {
	rules, err := os.ReadFile(filepath.Join("monitoring", "mirror-alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert, Expr string
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(rules, &doc); err != nil {
		t.Fatal(err)
	}
	exprs := ""
	for _, g := range doc.Spec.Groups {
		for _, r := range g.Rules {
			exprs += r.Expr + "\n"
		}
	}
	for _, metric := range []string{"kubectl_gitops_mirror_oldest_unmirrored_age_seconds", "kubectl_gitops_mirror_write_once", "kubectl_gitops_mirror_newest_record"} {
		if !strings.Contains(exprs, metric) {
			t.Errorf("no alert watches %s", metric)
		}
	}
}
