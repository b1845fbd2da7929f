//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/drift"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// TestExpiryIsTheContractsAndTheLogs: the namespace's max-pause bounds
// --expires and is the default; the planned record holds the expiry and
// auto-restore, status shows them, and an on-call edit of the annotation
// that pushes the expiry out is named as disagreeing with the log.
func TestExpiryIsTheContractsAndTheLogs(t *testing.T) {
	core(t)
	const ns = "ex-web"
	deployWithPolicy(t, ns, map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}}, nil)
	admin, oncall := newUser(t, env.Admin.Name), argoUser(t)
	admin.kubectl("annotate", "namespace", ns, "--overwrite", drift.ContractMaxPause+"=1h", drift.ContractAutoRestore+"=true")
	patch := []string{"breakglass", ns, "deployment/web", "--replicas", "3", "--reason", "expiry", "-y"}

	if _, errOut := mustRun(t, oncall, 1, append(patch, "--expires", "2h")...); !strings.Contains(errOut, "namespace ex-web pauses sync for at most 1h0m0s (kubectl-gitops.io/max-pause)") {
		t.Errorf("an expiry over the contract: %s", errOut)
	}
	start := time.Now()
	mustRun(t, oncall, 0, append(patch, "--expires", "30m")...)
	s := sessionOf(t, ns)
	var planned *audit.Record
	for _, r := range sessionRecords(t, s.ID) {
		if r.Event == audit.EventPlanned {
			planned = r
			break
		}
	}
	if planned == nil || planned.Expires == nil || planned.Expires.Before(start.Add(29*time.Minute)) || planned.Expires.After(start.Add(31*time.Minute)) || !planned.AutoRestore {
		t.Fatalf("the planned record: %+v; want expires in 30m and autoRestore from the contract", planned)
	}
	// The state changes are Events on the Application, for kubectl events,
	// Argo CD's UI and event exporters.
	events := admin.kubectl("-n", env.ArgoNamespace, "get", "events", "--field-selector", "involvedObject.kind=Application,involvedObject.name="+ns,
		"-o", "jsonpath={range .items[*]}{.type}/{.reason}: {.message}{\"\\n\"}{end}")
	for _, want := range []string{"Normal/BreakGlassOpened: oncall paused automated sync in break-glass session " + s.ID, "expires " + planned.Expires.Format(time.RFC3339), "Normal/Patched: oncall patched deployment.apps/web"} {
		if !strings.Contains(events, want) {
			t.Errorf("events of %s:\n%s\nwant %q", ns, events, want)
		}
	}
	st := statusJSON(t, oncall, ns)
	if st.Session.Expires == nil || !st.Session.Expires.Equal(*planned.Expires) || st.Expired || !st.Session.AutoRestore {
		t.Errorf("status: expires %v, expired %v, autoRestore %v", st.Session.Expires, st.Expired, st.Session.AutoRestore)
	}

	// On-call pushes the expiry out by a day in the annotation: status
	// evaluates the log's session and names the difference.
	later := planned.Expires.Add(24 * time.Hour)
	s.Expires = &later
	edited, _ := json.Marshal(s)
	oncall.kubectl("-n", env.ArgoNamespace, "annotate", "application", ns, "--overwrite", breakglass.SessionAnnotation+"="+string(edited))
	st = statusJSON(t, oncall, ns)
	if !st.Session.Expires.Equal(*planned.Expires) || !strings.Contains(strings.Join(st.Mismatch, "; "), "expires (annotation") {
		t.Errorf("an extended expiry in the annotation: status expires %v, mismatch %v", st.Session.Expires, st.Mismatch)
	}
}

// TestSyncTurnedBackOnBehindTheSession: Argo CD's toggle-auto-sync action
// (here its write, by an identity the admission policy does not hold, as
// argocd-server's is) re-enables sync in the middle of a session and Argo
// CD reverts the fix: status says so and --exit-code exits 1, restore and
// --join refuse, where status used to say "waiting".
func TestSyncTurnedBackOnBehindTheSession(t *testing.T) {
	core(t)
	const ns = "ex-toggle"
	deployWithPolicy(t, ns, map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}}, nil)
	admin, oncall := newUser(t, env.Admin.Name), argoUser(t)
	mustRun(t, oncall, 0, "breakglass", ns, "deployment/web", "--replicas", "3", "--reason", "toggle", "-y")
	admin.kubectl("-n", env.ArgoNamespace, "patch", "application", ns, "--type", "merge", "-p",
		`{"spec":{"syncPolicy":{"automated":{"enabled":true,"prune":true,"selfHeal":true}}}}`)

	if _, errOut, code := oncall.run("kubectl", "gitops", "status", ns, "--exit-code"); code != 1 || !strings.Contains(errOut, "automated sync is on again behind the session") {
		t.Errorf("status --exit-code: exit %d, %s", code, errOut)
	}
	if st := statusJSON(t, oncall, ns); !st.SyncReenabled || st.Restorable() {
		t.Errorf("status -o json: syncReenabled %v, restorable %v", st.SyncReenabled, st.Restorable())
	}
	if _, errOut := mustRun(t, oncall, 1, "restore", ns); !strings.Contains(errOut, "is on again, behind session") {
		t.Errorf("restore: %s", errOut)
	}
	if _, errOut := mustRun(t, oncall, 1, "breakglass", ns, "deployment/web", "--replicas", "4", "--reason", "again", "--join", "-y"); !strings.Contains(errOut, "a patch within it would be reverted") {
		t.Errorf("--join: %s", errOut)
	}
	// The way out the hint names closes the session.
	mustRun(t, oncall, 0, "restore", ns, "--force", "--reason", "sync was turned back on", "-y")
}
