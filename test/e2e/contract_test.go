//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/drift"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// deployWithPolicy deploys an application like the fixture's at apps/NAME
// into namespace NAME with syncPolicy and extra spec fields, and waits
// until it is Synced.
func deployWithPolicy(t *testing.T, name string, policy map[string]any, spec map[string]any) {
	t.Helper()
	createApp(t, name, func(app *unstructured.Unstructured, _ string) {
		app.Object["spec"].(map[string]any)["syncPolicy"] = policy
		for k, v := range spec {
			app.Object["spec"].(map[string]any)[k] = v
		}
	})
	waitSynced(t, name, "")
}

// TestContractRefusesAndPermitsAsDeclared: a namespace's annotations
// declare its live-state contract; breakglass follows it, drift flags a
// person's write against it, and contract check finds an Application whose
// self-heal contradicts it.
func TestContractRefusesAndPermitsAsDeclared(t *testing.T) {
	const ns = "ct-web"
	deployWithPolicy(t, ns, map[string]any{"automated": map[string]any{"prune": true}}, nil) // no self-heal
	admin, oncall := newUser(t, env.Admin.Name), argoUser(t)
	declare := func(kv ...string) {
		t.Helper()
		admin.kubectl(append([]string{"annotate", "namespace", ns, "--overwrite"}, kv...)...)
	}
	dryRun := []string{"breakglass", ns, "deployment/web", "--replicas", "3", "--reason", "contract", "--dry-run"}

	declare(drift.ContractPatches + "=forbidden")
	if _, errOut := mustRun(t, oncall, 1, dryRun...); !strings.Contains(errOut, "namespace ct-web forbids live patches (kubectl-gitops.io/live-patches: forbidden): change Git instead") {
		t.Errorf("forbidden: %s", errOut)
	}
	declare(drift.ContractPatches+"=break-glass", drift.ContractGroups+"=sre")
	if _, errOut := mustRun(t, oncall, 1, dryRun...); !strings.Contains(errOut, "namespace ct-web lets only groups sre patch live state (kubectl-gitops.io/live-patch-groups); oncall is in oncall") {
		t.Errorf("another group: %s", errOut)
	}
	declare(drift.ContractGroups + "=sre, oncall")
	mustRun(t, oncall, 0, dryRun...)
	declare(drift.ContractPatches + "=forbiden")
	if _, errOut := mustRun(t, oncall, 1, dryRun...); !strings.Contains(errOut, `declares kubectl-gitops.io/live-patches: "forbiden", which is none of forbidden, break-glass, allowed`) {
		t.Errorf("a misspelt rule: %s", errOut)
	}

	// A person's write where only break-glass may patch is flagged.
	declare(drift.ContractPatches + "=break-glass")
	admin.kubectl("-n", ns, "scale", "deployment", "web", "--replicas", "4")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var replicas *drift.Field
	waitFor(ctx, t, "drift to see the scale", func() (bool, string) {
		replicas = driftedField(driftJSON(t, argoAdmin(t), ns), "Deployment", "/spec/replicas")
		return replicas != nil, "not yet"
	})
	if replicas.Contract != "namespace ct-web allows live patches only through break-glass" || !strings.HasPrefix(replicas.Response, "against the contract: ") {
		t.Errorf("drift against the contract: %+v", replicas)
	}

	// Self-heal expected on, and this Application does not self-heal.
	declare(drift.ContractSelfHeal + "=on")
	out, _, code := oncall.run("kubectl", "gitops", "contract", "check", "-o", "json", "--exit-code")
	var findings []drift.SelfHealFinding
	if err := json.Unmarshal([]byte(out), &findings); err != nil || code != 1 {
		t.Fatalf("contract check: exit %d, %v: %s", code, err, out)
	}
	found := false
	for _, f := range findings {
		if f.App.Name == ns && !f.SelfHeal && strings.Contains(f.Problem, "expects self-heal on") {
			found = true
		}
	}
	if !found {
		t.Errorf("contract check did not report %s: %+v", ns, findings)
	}
	declare(drift.ContractSelfHeal + "=off")
	if _, _, code := oncall.run("kubectl", "gitops", "contract", "check", ns, "--exit-code"); code != 0 {
		t.Errorf("contract check of an Application that keeps its contract: exit %d", code)
	}
}

// TestDebtFlagsEntriesAndIgnoreDifferencesHidesDrift: an ignoreDifferences
// entry hides its field from drift; debt lists each entry, flags the
// unowned, the unused, the overdue and the over-cap, and debt record
// writes an owner with a guarded patch.
func TestDebtFlagsEntriesAndIgnoreDifferencesHidesDrift(t *testing.T) {
	const name = "db-web"
	replicasEntry := map[string]any{"group": "apps", "kind": "Deployment", "jsonPointers": []any{"/spec/replicas"}}
	unusedEntry := map[string]any{"kind": "Service", "jsonPointers": []any{"/spec/ports"}} // the core group is no group at all
	deployWithPolicy(t, name, map[string]any{"automated": map[string]any{"prune": true}}, map[string]any{"ignoreDifferences": []any{replicasEntry, unusedEntry}})
	admin, oncall := newUser(t, env.Admin.Name), argoUser(t)
	admin.kubectl("-n", name, "scale", "deployment", "web", "--replicas", "6")
	admin.kubectl("-n", name, "set", "image", "deployment/web", "web=registry.example/web:debt")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var reports []drift.Report
	waitFor(ctx, t, "drift to see the image", func() (bool, string) {
		reports = driftJSON(t, oncall, name)
		return driftedField(reports, "Deployment", "/spec/template/spec/containers/web/image") != nil, jsonText(reports)
	})
	if f := driftedField(reports, "Deployment", "/spec/replicas"); f != nil {
		t.Errorf("ignoreDifferences did not hide /spec/replicas: %+v", f)
	}

	debt := func(u *user, args ...string) []drift.DebtEntry {
		t.Helper()
		out, errOut, _ := u.run("kubectl", append([]string{"gitops", "debt", "-o", "json"}, args...)...)
		var entries []drift.DebtEntry
		if err := json.Unmarshal([]byte(out), &entries); err != nil {
			t.Fatalf("debt: %v: %s %s", err, out, errOut)
		}
		return entries
	}
	flags := func(entries []drift.DebtEntry, id string) string {
		for _, e := range entries {
			if e.ID == id {
				return strings.Join(e.Flags, ",")
			}
		}
		return "missing"
	}
	used, unused := drift.DebtID(replicasEntry), drift.DebtID(unusedEntry)
	entries := debt(oncall, name)
	if flags(entries, used) != "no-owner" || flags(entries, unused) != "no-owner,matches-nothing" {
		t.Errorf("debt before any note: %+v", entries)
	}
	mustRun(t, oncall, 0, "debt", "record", name, used, "--owner", "team-payments", "--reason", "the HPA owns replicas", "--review", "2099-01-01")
	entries = debt(oncall, name)
	if flags(entries, used) != "" || flags(entries, unused) != "no-owner,matches-nothing" {
		t.Errorf("debt after recording an owner: %+v", entries)
	}
	if _, code := runCode(oncall, "debt", name, "--exit-code"); code != 1 {
		t.Errorf("debt --exit-code with a flagged entry: exit %d", code)
	}
	if flags(debt(oncall, name, "--max-per-app", "1"), used) != "over-cap" {
		t.Errorf("--max-per-app 1 does not flag the entries")
	}
	mustRun(t, oncall, 0, "debt", "record", name, used, "--owner", "team-payments", "--reason", "the HPA owns replicas", "--review", "2020-01-01")
	if flags(debt(oncall, name), used) != "review-overdue" {
		t.Errorf("a past review date is not flagged")
	}
	if _, errOut := mustRun(t, oncall, 1, "debt", "record", name, "000000000000", "--owner", "x", "--reason", "y", "--review", "2099-01-01"); !strings.Contains(errOut, "has no ignoreDifferences entry 000000000000") {
		t.Errorf("recording a missing entry: %s", errOut)
	}
	// System-level entries of argocd-cm, for those who may read it.
	admin.kubectl("-n", "argocd", "patch", "configmap", "argocd-cm", "--type=merge", "-p", `{"data":{"resource.customizations.ignoreDifferences.apps_Deployment":"jsonPointers:\n- /spec/replicas\n"}}`)
	defer admin.kubectl("-n", "argocd", "patch", "configmap", "argocd-cm", "--type=json", "-p", `[{"op":"remove","path":"/data/resource.customizations.ignoreDifferences.apps_Deployment"}]`)
	var system bool
	for _, e := range debt(argoAdmin(t), name, "--system") {
		if e.System && e.Key == "resource.customizations.ignoreDifferences.apps_Deployment" && strings.Join(e.Flags, ",") == "no-owner" {
			system = true
		}
	}
	if !system {
		t.Errorf("the system-level entry is not listed")
	}
}
