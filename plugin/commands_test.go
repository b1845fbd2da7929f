package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/drift"
	"github.com/kubectl-gitops/kubectl-gitops/redact"
	"github.com/kubectl-gitops/kubectl-gitops/ticket"
)

// cmdTestCase is one command line on a fresh fake cluster, with one
// assertion (flux2's cmdTestCase): setup brings the cluster to the state
// the line needs, then the line runs. go test -run 'TestCommands/NAME'
// runs one.
type cmdTestCase struct {
	name   string
	setup  func(t *testing.T, f *fakeCluster)
	args   []string
	assert func(t *testing.T, f *fakeCluster, r cmdResult)
}

// cmdResult is what a command line did.
type cmdResult struct {
	args      []string
	code      int
	out, errs string
}

// assertGolden wants exit code want and the output of testdata/name.
func assertGolden(name string, want int) func(*testing.T, *fakeCluster, cmdResult) {
	return func(t *testing.T, _ *fakeCluster, r cmdResult) {
		t.Helper()
		if r.code != want {
			t.Fatalf("kubectl gitops %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(r.args, " "), r.code, want, r.out, r.errs)
		}
		golden(t, name, normalise("$ kubectl gitops "+strings.Join(r.args, " ")+"\n--- stdout\n"+r.out+"--- stderr\n"+r.errs))
	}
}

// assertError wants exit code want and an error line containing msg.
func assertError(want int, msg string) func(*testing.T, *fakeCluster, cmdResult) {
	return func(t *testing.T, _ *fakeCluster, r cmdResult) {
		t.Helper()
		if r.code != want || !strings.Contains(r.errs, msg) {
			t.Errorf("kubectl gitops %s: exit %d, stderr %q; want exit %d and %q", strings.Join(r.args, " "), r.code, r.errs, want, msg)
		}
	}
}

// assertCluster wants exit 0 and then check to hold of the cluster.
func assertCluster(check func(t *testing.T, f *fakeCluster)) func(*testing.T, *fakeCluster, cmdResult) {
	return func(t *testing.T, f *fakeCluster, r cmdResult) {
		t.Helper()
		if r.code != ExitOK {
			t.Fatalf("kubectl gitops %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(r.args, " "), r.code, r.out, r.errs)
		}
		check(t, f)
	}
}

// given runs command lines that must succeed, as a test's setup.
func given(lines ...[]string) func(*testing.T, *fakeCluster) {
	return func(t *testing.T, _ *fakeCluster) {
		t.Helper()
		for _, args := range lines {
			if code, out, errOut := runPlugin(t, args...); code != ExitOK {
				t.Fatalf("setup: kubectl gitops %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
			}
		}
	}
}

// then runs setup after setup.
func then(steps ...func(*testing.T, *fakeCluster)) func(*testing.T, *fakeCluster) {
	return func(t *testing.T, f *fakeCluster) {
		t.Helper()
		for _, step := range steps {
			step(t, f)
		}
	}
}

// gitCatchesUp is Git committing the fix (replicas 3).
func gitCatchesUp(_ *testing.T, f *fakeCluster) {
	f.commit("2222222222222222222222222222222222222222", 3)
}

// argoReconciles has the fake Argo CD reconcile the Application now, as a
// Git webhook's refresh does, and waits until it reports Git's revision
// and has answered every request (nothing changes for half a second).
func argoReconciles(t *testing.T, f *fakeCluster) {
	t.Helper()
	apps := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd")
	if _, err := apps.Patch(context.Background(), "web", types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+argocd.RefreshAnnotation+`":"normal"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	want := f.gitRevision
	f.mu.Unlock()
	reports := func() bool {
		revision, _, _ := unstructured.NestedString(f.app().Object, "status", "sync", "revision")
		return argocd.AppOf(f.app()).Refreshed() && revision == want
	}
	for deadline := time.Now().Add(5 * time.Second); !reports(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the fake Argo CD did not reconcile within 5s")
		}
	}
	for version := ""; version != f.app().GetResourceVersion(); time.Sleep(500 * time.Millisecond) {
		version = f.app().GetResourceVersion()
	}
}

// aMinuteLater makes Argo CD's last reconcile a minute old.
func aMinuteLater(t *testing.T, f *fakeCluster) {
	t.Helper()
	stamp := `{"status":{"reconciledAt":"` + time.Now().Add(-time.Minute).UTC().Format(time.RFC3339) + `"}}`
	if _, err := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd").Patch(context.Background(), "web", types.MergePatchType, []byte(stamp), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// gitMovesAway is Git committing over the fix (replicas 2 again).
func gitMovesAway(_ *testing.T, f *fakeCluster) {
	f.commit("3333333333333333333333333333333333333333", 2)
}

// contract gives the target's namespace, demo, a live-state contract.
func contract(annotations map[string]string) func(*testing.T, *fakeCluster) {
	return func(t *testing.T, f *fakeCluster) {
		t.Helper()
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo", Annotations: annotations}}
		if _, err := f.kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// opened is the planned record that opened the session.
func opened(t *testing.T, f *fakeCluster) *audit.Record {
	t.Helper()
	for _, r := range records(t, f) {
		if r.Event == audit.EventPlanned {
			return r
		}
	}
	t.Fatal("no planned record")
	return nil
}

// assertEvents wants exit 0 and then the Application's Events to be
// these, as TYPE/REASON, oldest first.
func assertEvents(want ...string) func(*testing.T, *fakeCluster, cmdResult) {
	return assertCluster(func(t *testing.T, f *fakeCluster) {
		list, err := f.kube.CoreV1().Events("argocd").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
		var got []string
		for _, ev := range list.Items {
			if ev.InvolvedObject.Kind != "Application" || ev.InvolvedObject.Name != "web" || ev.Source.Component != "kubectl-gitops" {
				t.Errorf("event %s is about %+v, from %s", ev.Name, ev.InvolvedObject, ev.Source.Component)
			}
			got = append(got, ev.Type+"/"+ev.Reason)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("events %v, want %v", got, want)
		}
	})
}

// syncTurnedBackOn is automated sync re-enabled behind the session, as
// Argo CD's toggle-auto-sync action writes it.
func syncTurnedBackOn(t *testing.T, f *fakeCluster) {
	t.Helper()
	patch := []byte(`{"spec":{"syncPolicy":{"automated":{"enabled":true}}}}`)
	if _, err := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd").Patch(context.Background(), "web", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// pendingPatchForged adds to the session annotation, as on-call may, a
// patch "being applied" whose digests would say Git holds the fix.
var pendingPatchForged = annotationEdited(func(s *breakglass.Session) {
	s.Patches = append(s.Patches, breakglass.SessionPatch{ID: "forged", Target: s.Patches[0].Target, Type: "merge", Fields: s.Patches[0].Fields, At: time.Now(), Pending: true})
})

// savedNoticePlanted is a savedNotice another on-call wrote into the
// session annotation: their notice, for the close to put back.
var savedNoticePlanted = annotationEdited(func(s *breakglass.Session) {
	s.SavedNotice = map[string]string{breakglass.NoticeContent: "Git has the fix. Sync is safe.", breakglass.NoticeURL: "https://evil.example/fix"}
})

// bannerRewritten is the banner of the open session rewritten by another
// on-call, with a link to another host.
func bannerRewritten(t *testing.T, f *fakeCluster) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		breakglass.NoticeContent: "Git has the fix. Sync is safe.", breakglass.NoticeURL: "https://evil.example/fix"}}})
	if _, err := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd").Patch(context.Background(), "web", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// annotationEdited writes the session annotation as edit leaves it, as
// another on-call may (the policy lets the group write within a session).
func annotationEdited(edit func(*breakglass.Session)) func(*testing.T, *fakeCluster) {
	return func(t *testing.T, f *fakeCluster) {
		t.Helper()
		s := sessionOn(t, f)
		edit(s)
		value, _ := json.Marshal(s)
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{breakglass.SessionAnnotation: string(value)}}})
		if _, err := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd").Patch(context.Background(), "web", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// editedBehind is the session annotation as another on-call may write it:
// still pausing (which refused every --join and hid sync turned back on),
// expiring a day later (which silenced the expiry), auto-restore turned
// over, and a parent the log never paused, whose saved policy a restore
// acting on the annotation would write back.
var editedBehind = annotationEdited(func(s *breakglass.Session) {
	s.State = breakglass.StatePausing
	later := time.Now().Add(24 * time.Hour).Truncate(time.Second)
	if s.Expires != nil {
		later = s.Expires.Add(24 * time.Hour)
	}
	s.Expires, s.AutoRestore = &later, !s.AutoRestore
	s.PausedParents = append(s.PausedParents, breakglass.PausedParent{Name: "root", Namespace: "argocd", SavedSyncPolicy: []byte(`{"automated":{"selfHeal":true}}`)})
})

// statusOf is `status web -o json`, which must succeed.
func statusOf(t *testing.T) *breakglass.SessionStatus {
	t.Helper()
	code, out, errOut := runPlugin(t, "status", "web", "-o", "json")
	var statuses []*breakglass.SessionStatus
	if err := json.Unmarshal([]byte(out), &statuses); code != ExitOK || err != nil || len(statuses) != 1 {
		t.Fatalf("status web -o json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	return statuses[0]
}

// interruptedJoin is a --join by the session's opener whose run was
// stopped after it marked its patch (replicas 5) as being sent: its
// planned record says it ran as process pid on this host. With lands, the
// patch reached the Deployment before the run died.
func interruptedJoin(pid int, lands bool) func(*testing.T, *fakeCluster) {
	return func(t *testing.T, f *fakeCluster) {
		t.Helper()
		ctx := context.Background()
		s, err := breakglass.ParseSession(f.app().GetAnnotations()[breakglass.SessionAnnotation])
		if err != nil {
			t.Fatal(err)
		}
		open := opened(t, f)
		host, _ := os.Hostname()
		target := *open.Target
		plan := &audit.Record{Event: audit.EventPlanned, Session: s.ID, Actor: open.Actor, Client: audit.Client{Host: host, PID: pid},
			Reason: "more", Application: open.Application, Cluster: open.Cluster, Target: &target, Git: open.Git,
			Patch: &audit.Patch{Type: "merge", Body: `{"spec":{"replicas":5}}`}, Changes: []audit.Change{{Path: "/spec/replicas", Before: int64(3), After: int64(5)}},
			Outcome: audit.Outcome{Status: audit.StatusStarted}}
		if err := f.audit.Append(ctx, plan); err != nil {
			t.Fatal(err)
		}
		s.Patches = append(s.Patches, breakglass.SessionPatch{ID: plan.ID, Target: target, Type: "merge", At: time.Now(), Pending: true,
			Fields: []breakglass.PatchedField{{Path: "/spec/replicas", Before: jsonDigest(3), After: jsonDigest(5)}}})
		value, _ := json.Marshal(s)
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{breakglass.SessionAnnotation: string(value)}}})
		if _, err := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd").Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if lands {
			if _, err := f.dyn.Resource(deploymentsGVR).Namespace("demo").Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{FieldManager: argocd.FieldManager}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// sessionOn is the session annotation on web, nil when there is none.
func sessionOn(t *testing.T, f *fakeCluster) *breakglass.Session {
	t.Helper()
	value, open := f.app().GetAnnotations()[breakglass.SessionAnnotation]
	if !open {
		return nil
	}
	s, err := breakglass.ParseSession(value)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// endedProcess is the pid of a process of this host that has ended.
func endedProcess(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no `true` to run:", err)
	}
	return cmd.Process.Pid
}

// jsonDigest is the session's digest of v, as breakglass computes it.
func jsonDigest(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// lastEvents are the last n records' events, with the resolved plan
// marked: "breakglass.patched<resolves>".
func lastEvents(t *testing.T, f *fakeCluster, n int) string {
	t.Helper()
	all := records(t, f)
	var out []string
	for _, r := range all[max(0, len(all)-n):] {
		e := string(r.Event) + "/" + r.Outcome.Status
		if r.Resolves != "" {
			e += "<resolves>"
		}
		out = append(out, e)
	}
	return strings.Join(out, ",")
}

// repointed is the Application's source moved to a side branch, as
// argocd-server writes it for anyone with Argo CD's applications, update.
func repointed(t *testing.T, f *fakeCluster) {
	t.Helper()
	patch := []byte(`{"spec":{"source":{"targetRevision":"side-branch-with-the-fix"}}}`)
	if _, err := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd").Patch(context.Background(), "web", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// ownNotice is the Application's own Argo CD notice, set by its team.
func ownNotice(t *testing.T, f *fakeCluster) {
	t.Helper()
	patch := []byte(`{"metadata":{"annotations":{"notice.argocd.argoproj.io/content":"Owned by team-payments","notice.argocd.argoproj.io/scope":"icon"}}}`)
	if _, err := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd").Patch(context.Background(), "web", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// noticeOf is the Application's notice annotations, KEY=VALUE sorted.
func noticeOf(t *testing.T, f *fakeCluster) string {
	t.Helper()
	var out []string
	for k, v := range f.app().GetAnnotations() {
		if strings.HasPrefix(k, "notice.argocd.argoproj.io/") {
			out = append(out, strings.TrimPrefix(k, "notice.argocd.argoproj.io/")+"="+v)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// revertedBy is the Deployment's replicas put back to Git's 2 by manager,
// as a manual Sync (argocd-controller) or a person's kubectl would.
func revertedBy(manager string) func(*testing.T, *fakeCluster) {
	return func(t *testing.T, f *fakeCluster) {
		t.Helper()
		d := liveDeployment(t, f)
		_ = unstructured.SetNestedField(d.Object, int64(2), "spec", "replicas")
		now := metav1.Now()
		d.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1", Time: &now,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}}})
		if _, err := f.dyn.Resource(deploymentsGVR).Namespace("demo").Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// forgedClose is a breakglass.restored record of the open session,
// appended by another on-call in their own name: the Application stays
// paused, holding the fix.
func forgedClose(t *testing.T, f *fakeCluster) {
	t.Helper()
	open := opened(t, f)
	if err := f.audit.Append(context.Background(), &audit.Record{Event: audit.EventRestored, Session: open.Session, Actor: audit.Actor{Username: "mallory", Groups: []string{"oncall"}},
		Application: open.Application, Outcome: audit.Outcome{Status: audit.StatusSucceeded}}); err != nil {
		t.Fatal(err)
	}
}

// statePausing writes "state":"pausing" into the session annotation, as
// another on-call may.
var statePausing = annotationEdited(func(s *breakglass.Session) { s.State = breakglass.StatePausing })

// silentPause is another Application, "other", paused by hand with a
// paused-by mark naming web's open session, as the admission policy lets
// any on-call write it: no record, no notice.
func silentPause(t *testing.T, f *fakeCluster) {
	t.Helper()
	other := f.app().DeepCopy()
	other.SetName("other")
	other.SetResourceVersion("")
	other.SetAnnotations(map[string]string{breakglass.PausedByAnnotation: "web/" + sessionOn(t, f).ID})
	_ = unstructured.SetNestedField(other.Object, false, "spec", "syncPolicy", "automated", "enabled")
	if _, err := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd").Create(context.Background(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// jiraComesBack is Jira configured again, after the tickets were queued.
func jiraComesBack(_ *testing.T, f *fakeCluster) { f.tickets = &fakeTickets{} }

func liveDeployment(t *testing.T, f *fakeCluster) *unstructured.Unstructured {
	t.Helper()
	d, err := f.dyn.Resource(deploymentsGVR).Namespace("demo").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestCommands runs whole command lines through the engine seam's fake
// cluster: a break-glass's plan and patch (each way of giving the change),
// status in each format, a restore refused while Git waits and the restore
// once it caught up, ticket sync filing the queued ticket, and the command
// lines that must be refused.
// The hold's sync option and mode (TestCommands' breakglass is a command line).
const heldOption, holdApp = breakglass.RespectIgnoreDifferences, breakglass.HoldApp

func TestCommands(t *testing.T) {
	change := []string{"web", "deployment/web", "--type", "merge", "--patch", `{"spec":{"replicas":3}}`, "--reason", "5xx spike, scale out", "--incident", "INC-7"}
	breakglass := append(append([]string{"breakglass"}, change...), "-y")
	restored := then(given(breakglass), gitCatchesUp, given([]string{"restore", "web"}))
	for _, tt := range []cmdTestCase{
		{name: "breakglass dry run", args: append(append([]string{"breakglass"}, change...), "--dry-run"),
			assert: assertGolden("breakglass-dry-run.golden", ExitOK)},
		{name: "breakglass dry run writes nothing", args: append(append([]string{"breakglass"}, change...), "--dry-run"),
			assert: assertCluster(func(t *testing.T, f *fakeCluster) {
				if n := len(records(t, f)); n != 0 {
					t.Errorf("the dry run wrote %d audit records", n)
				}
			})},
		{name: "breakglass", args: breakglass, assert: assertGolden("breakglass.golden", ExitOK)},
		// -n is TARGET's namespace, the one command that takes it.
		{name: "breakglass -n", args: slices.Concat(breakglass, []string{"-n", "other"}),
			assert: assertError(ExitFailure, "deployment.apps/web in namespace other is not one of application")},
		{name: "breakglass patches the target", args: breakglass, assert: assertCluster(func(t *testing.T, f *fakeCluster) {
			if replicas, _, _ := unstructured.NestedInt64(liveDeployment(t, f).Object, "spec", "replicas"); replicas != 3 {
				t.Errorf("replicas %d after the break-glass, want 3", replicas)
			}
		})},
		// The schema has automated.enabled (Argo CD ≥ 3.1): the pause keeps
		// prune and selfHeal and turns automated sync off.
		{name: "breakglass pauses keeping the policy", args: breakglass, assert: assertCluster(func(t *testing.T, f *fakeCluster) {
			if enabled, set, _ := unstructured.NestedBool(f.app().Object, "spec", "syncPolicy", "automated", "enabled"); !set || enabled {
				t.Errorf("automated sync not paused: %v", f.app().Object["spec"])
			}
		})},
		// The default patch type is strategic: containers merge by name.
		{name: "breakglass strategic patch", args: []string{"breakglass", "web", "deployment/web", "--patch", `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"registry.example/web:1.0.1"}]}}}}`, "--reason", "hotfix", "-y"},
			assert: assertCluster(func(t *testing.T, f *fakeCluster) {
				containers, _, _ := unstructured.NestedSlice(liveDeployment(t, f).Object, "spec", "template", "spec", "containers")
				if len(containers) != 1 || containers[0].(map[string]any)["image"] != "registry.example/web:1.0.1" || containers[0].(map[string]any)["name"] != "web" {
					t.Errorf("containers after a strategic patch: %v", containers)
				}
			})},
		{name: "breakglass image", args: []string{"breakglass", "web", "deployment/web", "--image", "web=registry.example/web:0.9.8", "--reason", "roll back", "-y"},
			assert: assertGolden("breakglass-image.golden", ExitOK)},
		{name: "breakglass image of no container", args: []string{"breakglass", "web", "deployment/web", "--image", "api=registry.example/api:2", "--reason", "roll back", "-y"},
			assert: assertError(ExitFailure, "--image: names container api, which deployment.apps/web does not have (it has web)")},
		{name: "breakglass expiry beyond the contract", setup: contract(map[string]string{drift.ContractMaxPause: "8h"}), args: slices.Concat(breakglass, []string{"--expires", "10h"}),
			assert: assertError(ExitFailure, "namespace demo pauses sync for at most 8h0m0s (kubectl-gitops.io/max-pause): ask for that or less")},
		{name: "breakglass contract spelt wrongly", setup: contract(map[string]string{drift.ContractMaxPause: "a day"}), args: breakglass,
			assert: assertError(ExitFailure, `declares kubectl-gitops.io/max-pause: "a day", which is not a duration such as 8h`)},
		{name: "breakglass records the contract's expiry and auto-restore",
			setup: contract(map[string]string{drift.ContractMaxPause: "8h", drift.ContractAutoRestore: "true"}), args: breakglass,
			assert: assertCluster(func(t *testing.T, f *fakeCluster) {
				r := opened(t, f)
				if r.Expires == nil || time.Until(*r.Expires) < 7*time.Hour || time.Until(*r.Expires) > 8*time.Hour || !r.AutoRestore {
					t.Errorf("planned record: expires %v, autoRestore %v; want in 8h, true", r.Expires, r.AutoRestore)
				}
			})},
		{name: "breakglass --auto-restore=false over the contract",
			setup: contract(map[string]string{drift.ContractAutoRestore: "true"}), args: slices.Concat(breakglass, []string{"--expires", "2h", "--auto-restore=false"}),
			assert: assertCluster(func(t *testing.T, f *fakeCluster) {
				if r := opened(t, f); r.Expires == nil || time.Until(*r.Expires) > 2*time.Hour || r.AutoRestore {
					t.Errorf("planned record: expires %v, autoRestore %v; want in 2h, false", r.Expires, r.AutoRestore)
				}
			})},
		// The session was opened with no expiry; the join's target
		// namespace pauses sync for at most 8h: the join ignored it.
		{name: "breakglass join honours its namespace's max-pause", setup: then(given(breakglass), contract(map[string]string{drift.ContractMaxPause: "8h"})),
			args:   []string{"breakglass", "web", "deployment/web", "--replicas", "4", "--reason", "more", "--join", "-y"},
			assert: assertError(ExitFailure, "namespace demo pauses sync for at most 8h0m0s (kubectl-gitops.io/max-pause), and session ")},
		{name: "breakglass join within its namespace's max-pause", setup: then(given(slices.Concat(breakglass, []string{"--expires", "1h"})), contract(map[string]string{drift.ContractMaxPause: "8h"})),
			args:   []string{"breakglass", "web", "deployment/web", "--replicas", "4", "--reason", "more", "--join", "-y"},
			assert: assertEvents("Normal/BreakGlassOpened", "Normal/Patched", "Normal/Joined")},
		{name: "breakglass join keeps the session's expiry", setup: given(breakglass),
			args:   []string{"breakglass", "web", "deployment/web", "--replicas", "4", "--reason", "more", "--join", "--expires", "1h", "-y"},
			assert: assertError(ExitUsage, "--expires: a joined patch keeps the session's expiry: give none")},
		{name: "breakglass join keeps the session's auto-restore", setup: given(breakglass),
			args:   []string{"breakglass", "web", "deployment/web", "--replicas", "4", "--reason", "more", "--join", "--auto-restore", "-y"},
			assert: assertError(ExitUsage, "--auto-restore: a joined patch keeps the session's choice: give none")},
		{name: "status expired", setup: then(given(slices.Concat(breakglass, []string{"--expires", "1s", "--auto-restore"})), func(*testing.T, *fakeCluster) { time.Sleep(1100 * time.Millisecond) }),
			args: []string{"status"}, assert: assertGolden("status-expired.golden", ExitOK)},
		{name: "breakglass emits events", args: breakglass, assert: assertEvents("Normal/BreakGlassOpened", "Normal/Patched")},
		{name: "breakglass join emits an event", setup: given(breakglass),
			args:   []string{"breakglass", "web", "deployment/web", "--replicas", "4", "--reason", "more", "--join", "-y"},
			assert: assertEvents("Normal/BreakGlassOpened", "Normal/Patched", "Normal/Joined")},
		{name: "drift --propose without APP", args: []string{"drift", "--propose"},
			assert: assertError(ExitUsage, "--propose moves one Application's drift into Git: name APP, without -A")},
		{name: "drift --dry-run without --propose", args: []string{"drift", "web", "--dry-run"},
			assert: assertError(ExitUsage, "--dry-run, --yes, --provider, --api-url and --git-project go with --propose")},
		{name: "drift --propose without --yes", args: []string{"drift", "web", "--propose"},
			assert: assertError(ExitUsage, "--propose pushes live values into Git, where they stay: see the change with --dry-run, then add --yes")},
		{name: "drift --propose without the Argo CD API", args: []string{"drift", "web", "--propose", "--dry-run"},
			assert: assertError(ExitFailure, "--propose needs each drifted field and its live value, which only the Argo CD API compares")},
		{name: "controller --tsa without a signing key", args: []string{"controller", "--mirror", "s3://b/p", "--tsa", "https://tsa.example"},
			assert: assertError(ExitUsage, "--tsa timestamps checkpoints: it needs --checkpoint-key")},
		{name: "controller --tsa that is no URL", args: []string{"controller", "--mirror", "s3://b/p", "--checkpoint-key", "k.pem", "--tsa", "tsa.example"},
			assert: assertError(ExitUsage, `--tsa "tsa.example": give the timestamp authority's http(s) URL`)},
		{name: "audit verify --tsa-certs without a mirror", args: []string{"audit", "verify", "--tsa-certs", "chain.pem"},
			assert: assertError(ExitUsage, "--tsa-certs checks the mirror's checkpoint timestamps: it needs --mirror s3://BUCKET/PREFIX")},
		{name: "controller --prune-after without a signing key", args: []string{"controller", "--mirror", "s3://b/p", "--prune-after", "2160h"},
			assert: assertError(ExitUsage, "--prune-after needs --mirror on a bucket with Object Lock (not --mirror-accept-unlocked) and --checkpoint-key")},
		{name: "controller --prune-after on an unlocked bucket", args: []string{"controller", "--mirror", "s3://b/p", "--checkpoint-key", "k.pem", "--mirror-accept-unlocked", "--prune-after", "2160h"},
			assert: assertError(ExitUsage, "--prune-after needs --mirror on a bucket with Object Lock")},
		{name: "controller --prune-after past the mirror's lock", args: []string{"controller", "--mirror", "s3://b/p", "--checkpoint-key", "k.pem", "--mirror-retention", "720h", "--prune-after", "2160h"},
			assert: assertError(ExitUsage, "--mirror-retention 720h0m0s must be longer than --prune-after 2160h0m0s")},
		{name: "propose to an unknown provider", args: []string{"propose", "web", "--provider", "bitbucket"},
			assert: assertError(ExitUsage, "--provider is github, gitlab or none")},
		{name: "propose --api-url with no provider to call", args: []string{"propose", "web", "--provider", "none", "--api-url", "https://git.example/api/v4"},
			assert: assertError(ExitUsage, "--api-url and --project go with --provider github or gitlab")},
		{name: "breakglass --provider without --propose", args: slices.Concat(breakglass, []string{"--provider", "github"}),
			assert: assertError(ExitUsage, "--provider, --api-url and --project go with --propose")},
		{name: "propose with no session", args: []string{"propose", "web"},
			assert: assertError(ExitFailure, "there is no live fix to propose")},
		{name: "restore emits an event", setup: then(given(breakglass), gitCatchesUp), args: []string{"restore", "web"},
			assert: assertEvents("Normal/BreakGlassOpened", "Normal/Patched", "Normal/Restored")},
		{name: "forced restore emits a warning", setup: given(breakglass), args: []string{"restore", "web", "--force", "--reason", "abandoned", "-y"},
			assert: assertEvents("Normal/BreakGlassOpened", "Normal/Patched", "Warning/Forced")},
		// A pending patch is the annotation's word alone: it used to
		// override the logged patch in the catch-up check, and to hold
		// every restore, forced or not, for good.
		{name: "status names a pending patch no run of the log sends", setup: then(given(breakglass), gitCatchesUp, pendingPatchForged), args: []string{"status", "web", "--exit-code"},
			assert: assertError(ExitOK, "pending patches (annotation 1, audit log 0 runs in flight)")},
		{name: "forced restore ends a session with a forged pending patch", setup: then(given(breakglass), pendingPatchForged),
			args: []string{"restore", "web", "--force", "--reason", "stuck", "-y"}, assert: assertLastSession("forced")},
		// A run killed after it marked its patch as being sent: the next
		// look resolves it from the live target, in the looker's name, and
		// the session goes on. Restore refused it for good before.
		{name: "status resolves an interrupted run whose patch landed", setup: then(given(breakglass), func(t *testing.T, f *fakeCluster) { interruptedJoin(endedProcess(t), true)(t, f) }),
			args: []string{"status", "web"}, assert: assertCluster(func(t *testing.T, f *fakeCluster) {
				if got := lastEvents(t, f, 1); got != "breakglass.patched/succeeded<resolves>" {
					t.Errorf("last record %s; want the resolver's breakglass.patched", got)
				}
				if s := sessionOn(t, f); len(s.Patches) != 2 || s.Patches[1].Pending {
					t.Errorf("session patches after the resolve: %+v", s.Patches)
				}
			})},
		{name: "restore resolves an interrupted run whose patch never landed, then restores", setup: then(given(breakglass), gitCatchesUp, func(t *testing.T, f *fakeCluster) { interruptedJoin(endedProcess(t), false)(t, f) }),
			args: []string{"restore", "web"}, assert: assertCluster(func(t *testing.T, f *fakeCluster) {
				if got := lastEvents(t, f, 3); got != "breakglass.abandoned/failed<resolves>,breakglass.restored/started,breakglass.restored/succeeded" {
					t.Errorf("last records %s", got)
				}
				if rep, err := audit.VerifyStore(context.Background(), f.audit, nil, nil); err != nil || !rep.Intact() {
					t.Errorf("the audit log does not verify: %v %v", err, rep.Breaks)
				}
			})},
		{name: "restore waits for a run still sending its patch", setup: then(given(breakglass), gitCatchesUp, interruptedJoin(os.Getpid(), false)),
			args: []string{"restore", "web"}, assert: assertError(ExitFailure, "is patching deployment.apps/web in session")},
		{name: "forced restore ends a run still sending its patch, recording it", setup: then(given(breakglass), interruptedJoin(os.Getpid(), true)),
			args: []string{"restore", "web", "--force", "--reason", "stuck", "-y"}, assert: assertCluster(func(t *testing.T, f *fakeCluster) {
				if got := lastEvents(t, f, 3); got != "breakglass.patched/succeeded<resolves>,breakglass.forced/started,breakglass.forced/succeeded" {
					t.Errorf("last records %s", got)
				}
				if s := sessionOn(t, f); s != nil {
					t.Errorf("session %s is still open", s.ID)
				}
			})},
		// A source repointed at a side branch that holds the fix: Git
		// "caught up" there, and a plain restore re-enabled sync, which
		// reverted the fix once the source was pointed back.
		{name: "status names a repointed source and is not ready", setup: then(given(breakglass), gitCatchesUp, repointed), args: []string{"status", "web", "--exit-code"},
			assert: assertError(ExitFailure, `the application was repointed behind the session (the source's targetRevision changed from "HEAD" to "side-branch-with-the-fix")`)},
		{name: "restore refuses a repointed source", setup: then(given(breakglass), gitCatchesUp, repointed), args: []string{"restore", "web"},
			assert: assertError(ExitFailure, "the application was repointed behind the session")},
		{name: "forced restore of a repointed source", setup: then(given(breakglass), gitCatchesUp, repointed), args: []string{"restore", "web", "--force", "--reason", "repointed on purpose", "-y"},
			assert: assertLastSession("forced")},
		{name: "the planned record pins the sources", args: breakglass, assert: assertCluster(func(t *testing.T, f *fakeCluster) {
			pin := opened(t, f).Pinned
			if pin == nil || len(pin.Sources) != 1 || pin.Sources[0].Path != "apps/web" || pin.Sources[0].TargetRevision != "HEAD" || pin.Destination.Namespace != "demo" || pin.Project != "default" || pin.Digest == "" {
				t.Errorf("pinned %+v", pin)
			}
		})},
		// The hold: a manual Sync reverted the fix while status said
		// "waiting" (issue 31). The patched paths are held through Argo
		// CD's own ignoreDifferences, and caught-up is never taken from
		// resource-level Synced under it.
		{name: "breakglass --hold app holds the patched fields", args: slices.Concat(breakglass, []string{"--hold", "app"}), assert: assertCluster(func(t *testing.T, f *fakeCluster) {
			entries, _, _ := unstructured.NestedSlice(f.app().Object, "spec", "ignoreDifferences")
			options, _, _ := unstructured.NestedStringSlice(f.app().Object, "spec", "syncPolicy", "syncOptions")
			if len(entries) != 1 || !slices.Contains(options, heldOption) || opened(t, f).Hold == nil || opened(t, f).Hold.Mode != holdApp {
				t.Errorf("ignoreDifferences %v, syncOptions %v, planned hold %+v", entries, options, opened(t, f).Hold)
			}
			if got, _ := json.Marshal(entries[0]); !strings.Contains(string(got), `"jqPathExpressions":[".spec.replicas"]`) || !strings.Contains(string(got), `"name":"web"`) || !strings.Contains(string(got), `"namespace":"demo"`) {
				t.Errorf("held entry %s", got)
			}
		})},
		{name: "a held session is not caught up from Synced alone", setup: then(given(slices.Concat(breakglass, []string{"--hold", "app"})), gitCatchesUp), args: []string{"status", "web", "-o", "wide", "--exit-code"},
			assert: func(t *testing.T, f *fakeCluster, r cmdResult) {
				if r.code != ExitFailure || !strings.Contains(r.out, "the hold keeps the patched fields out of Argo CD's compare (ignoreDifferences), so Synced proves nothing there") {
					t.Errorf("exit %d\n%s%s", r.code, r.out, r.errs)
				}
			}},
		{name: "the close puts ignoreDifferences and sync options back exactly", setup: then(given(slices.Concat(breakglass, []string{"--hold", "app"}))), args: []string{"restore", "web", "--force", "--reason", "held, Git fixed by hand", "-y"},
			assert: assertCluster(func(t *testing.T, f *fakeCluster) {
				if _, has, _ := unstructured.NestedFieldNoCopy(f.app().Object, "spec", "ignoreDifferences"); has {
					t.Errorf("ignoreDifferences left: %v", f.app().Object["spec"])
				}
				if options, _, _ := unstructured.NestedStringSlice(f.app().Object, "spec", "syncPolicy", "syncOptions"); !slices.Equal(options, []string{"CreateNamespace=true"}) {
					t.Errorf("syncOptions %v", options)
				}
			})},
		{name: "debt names the hold's entry as the session's", setup: given(slices.Concat(breakglass, []string{"--hold", "app"})), args: []string{"debt", "web", "--exit-code"},
			assert: func(t *testing.T, f *fakeCluster, r cmdResult) {
				if r.code != ExitOK || !strings.Contains(r.out, "session "+sessionOn(t, f).ID) || !strings.Contains(r.out, "at restore") {
					t.Errorf("exit %d\n%s%s", r.code, r.out, r.errs)
				}
			}},
		{name: "breakglass --hold of an unknown mode", args: slices.Concat(breakglass, []string{"--hold", "everything"}),
			assert: assertError(ExitUsage, `--hold "everything": use app (pause sync and hold the patched fields), sync (pause sync only) or fields (hold the patched fields, sync stays on)`)},
		{name: "breakglass --hold fields needs the Argo CD API", args: slices.Concat(breakglass, []string{"--hold", "fields"}),
			assert: assertError(ExitFailure, "--hold fields leaves automated sync on, and under it only the field-level check through the Argo CD API can tell when Git has caught up")},
		{name: "breakglass takes its namespace's hold", setup: contract(map[string]string{drift.ContractHold: "app"}), args: breakglass, assert: assertCluster(func(t *testing.T, f *fakeCluster) {
			if h := opened(t, f).Hold; h == nil || h.Mode != holdApp {
				t.Errorf("planned hold %+v, want the contract's app", h)
			}
		})},
		{name: "breakglass refuses a hold its namespace spells wrongly", setup: contract(map[string]string{drift.ContractHold: "everything"}), args: breakglass,
			assert: assertError(ExitFailure, `declares kubectl-gitops.io/hold: "everything", which is none of app, sync, fields`)},
		{name: "breakglass --join takes its session's hold", setup: given(breakglass), args: []string{"breakglass", "web", "deployment/web", "--replicas", "4", "--reason", "more", "--join", "--hold", "app", "-y"},
			assert: assertError(ExitUsage, "a joined patch is held as its session holds: give none")},
		// A manual Sync put Git's replicas back over the fix: status said
		// "waiting" and nothing else.
		{name: "status shows a reverted fix and who reverted it", setup: then(given(breakglass), revertedBy("argocd-controller")), args: []string{"status", "web"},
			assert: func(t *testing.T, f *fakeCluster, r cmdResult) {
				if r.code != ExitOK || !strings.Contains(r.out, "waiting,REVERTED") ||
					!strings.Contains(r.errs, "REVERTED: the live fix no longer holds at deployment.apps/web /spec/replicas, by argocd-controller (argocd)") {
					t.Errorf("exit %d\n%s%s", r.code, r.out, r.errs)
				}
			}},
		// A close appended in someone's own name while the Application
		// stays paused: status said nothing, restore --force refused for
		// good, and verify found the log intact.
		{name: "status shows a session the log closed but the Application holds", setup: then(given(breakglass), forgedClose), args: []string{"status", "web", "--exit-code"},
			assert: assertError(ExitFailure, "close-without-restore: the audit log's breakglass.restored (record 5, by mallory) closed session")},
		{name: "forced restore ends a session whose close was forged", setup: then(given(breakglass), forgedClose), args: []string{"restore", "web", "--force", "--reason", "the close was forged", "-y"},
			assert: assertLastSession("forced")},
		{name: "verify names a close the Application did not follow", setup: then(given(breakglass), forgedClose), args: []string{"restore", "web", "--force", "--reason", "the close was forged", "-y"},
			assert: assertCluster(func(t *testing.T, f *fakeCluster) {
				rep, err := audit.VerifyStore(context.Background(), f.audit, nil, nil)
				if err != nil || len(rep.Breaks) != 1 || rep.Breaks[0].Kind != audit.BreakCloseWithoutRestore || rep.Breaks[0].Seq != 5 {
					t.Errorf("verify: %v %+v; want close-without-restore at the forged record 5", err, rep.Breaks)
				}
			})},
		// A pause made by hand with a parent's mark naming an open session
		// that never paused it: nothing said so.
		{name: "status names a pause no session accounts for", setup: then(given(breakglass), silentPause), args: []string{"status"},
			assert: func(t *testing.T, _ *fakeCluster, r cmdResult) {
				if !strings.Contains(r.errs, `application argocd/other is marked paused for session "web/`) || !strings.Contains(r.errs, "which never recorded pausing it") {
					t.Errorf("exit %d, stderr %q", r.code, r.errs)
				}
			}},
		{name: "contract check names a pause no session accounts for", setup: then(given(breakglass), silentPause), args: []string{"contract", "check", "--exit-code"},
			assert: assertError(ExitFailure, "which never recorded pausing it")},
		// Argo CD's UI tells whoever is about to press Sync not to.
		{name: "breakglass sets Argo CD's notice banner", setup: ownNotice, args: breakglass, assert: assertCluster(func(t *testing.T, f *fakeCluster) {
			got := noticeOf(t, f)
			for _, want := range []string{"content=BREAK-GLASS: do not sync. Session ", " by oncall holds the live fix of deployment.apps/web (/spec/replicas). Reason: 5xx spike, scale out. Incident INC-7.",
				"permanent=true", "scope=icon", "severity=critical"} {
				if !strings.Contains(got, want) {
					t.Errorf("notice annotations\n%s\nlack %q", got, want)
				}
			}
		})},
		{name: "restore puts the Application's own notice back", setup: then(ownNotice, given(breakglass), gitCatchesUp), args: []string{"restore", "web"},
			assert: assertCluster(func(t *testing.T, f *fakeCluster) {
				if got := noticeOf(t, f); got != "content=Owned by team-payments\nscope=icon" {
					t.Errorf("notice annotations after restore:\n%s", got)
				}
			})},
		// A savedNotice planted in the annotation was what the honest
		// restore put back: the attacker's notice stayed for good.
		{name: "restore puts back the notice the planned record saved, not the annotation's", setup: then(ownNotice, given(breakglass), gitCatchesUp, savedNoticePlanted), args: []string{"restore", "web"},
			assert: assertCluster(func(t *testing.T, f *fakeCluster) {
				if got := noticeOf(t, f); got != "content=Owned by team-payments\nscope=icon" {
					t.Errorf("notice annotations after restore:\n%s", got)
				}
			})},
		{name: "status names a planted savedNotice", setup: then(ownNotice, given(breakglass), savedNoticePlanted), args: []string{"status", "web", "-o", "json"},
			assert: func(t *testing.T, _ *fakeCluster, r cmdResult) {
				if !strings.Contains(r.out, `savedNotice (annotation`) {
					t.Errorf("exit %d, stdout %s; want the savedNotice named", r.code, r.out)
				}
			}},
		// The banner rewritten during the session ("Git has the fix. Sync
		// is safe." with a link elsewhere) was named nowhere.
		{name: "status names a rewritten banner", setup: then(given(breakglass), bannerRewritten), args: []string{"status", "web", "-o", "json"},
			assert: func(t *testing.T, _ *fakeCluster, r cmdResult) {
				if !strings.Contains(r.out, `notice banner: content (Application \"Git has the fix. Sync is safe.\"`) || !strings.Contains(r.out, `url (Application \"https://evil.example/fix\", audit log \"\")`) {
					t.Errorf("exit %d, stdout %s; want the banner named", r.code, r.out)
				}
			}},
		{name: "status names no banner of its own session", setup: given(breakglass), args: []string{"status", "web", "-o", "json"},
			assert: func(t *testing.T, _ *fakeCluster, r cmdResult) {
				if strings.Contains(r.out, "notice banner") {
					t.Errorf("stdout %s names the session's own banner", r.out)
				}
			}},
		// "pausing" in the annotation hid sync turned back on behind the
		// session, and status named no disagreement.
		{name: "status notices sync turned back on behind an annotation that says pausing", setup: then(given(breakglass), statePausing, syncTurnedBackOn),
			args: []string{"status", "web", "--exit-code"}, assert: func(t *testing.T, _ *fakeCluster, r cmdResult) {
				if r.code != ExitFailure || !strings.Contains(r.errs, "automated sync is on again behind the session") || !strings.Contains(r.errs, `state (annotation "pausing", audit log patched)`) {
					t.Errorf("exit %d, stderr %q", r.code, r.errs)
				}
			}},
		// Issue 32: a field of the annotation the log contradicts refused
		// every --join and every plain restore (and auto-restore), though
		// what they act on is the log's session. It is named, and holds
		// nothing back; a join writes the annotation back from the log.
		{name: "status names every field edited behind the session and is ready", setup: then(given(slices.Concat(breakglass, []string{"--expires", "1h"})), gitCatchesUp, editedBehind),
			args: []string{"status", "web", "--exit-code"}, assert: func(t *testing.T, f *fakeCluster, r cmdResult) {
				for _, want := range []string{`state (annotation "pausing", audit log patched)`, "expires (annotation ", "autoRestore (annotation true, audit log false)", "pausedParents (annotation [root], audit log [])"} {
					if !strings.Contains(r.errs, want) {
						t.Errorf("status --exit-code: stderr %q lacks %q", r.errs, want)
					}
				}
				if r.code != ExitOK {
					t.Errorf("status --exit-code: exit %d; Git caught up with the log's session", r.code)
				}
				if st := statusOf(t); !st.Session.Expires.Equal(*opened(t, f).Expires) || st.Session.AutoRestore || len(st.Session.PausedParents) != 0 || st.Session.State != "patched" || len(st.Mismatch) != 4 {
					t.Errorf("status -o json: session %+v, mismatch %q; want the log's", st.Session, st.Mismatch)
				}
			}},
		{name: "breakglass --join within a session edited behind it writes it back from the log", setup: then(given(slices.Concat(breakglass, []string{"--expires", "1h"})), editedBehind),
			args: []string{"breakglass", "web", "deployment/web", "--replicas", "4", "--reason", "more", "--join", "-y"},
			assert: func(t *testing.T, f *fakeCluster, r cmdResult) {
				if r.code != ExitOK || !strings.Contains(r.errs, `warning: the session annotation disagrees with its audit records: state (annotation "pausing", audit log patched)`) {
					t.Fatalf("--join: exit %d\n%s%s", r.code, r.out, r.errs)
				}
				if replicas, _, _ := unstructured.NestedInt64(liveDeployment(t, f).Object, "spec", "replicas"); replicas != 4 {
					t.Errorf("replicas %d after the join, want 4", replicas)
				}
				s := sessionOn(t, f)
				if s.State != "patched" || !s.Expires.Equal(*opened(t, f).Expires) || s.AutoRestore || len(s.PausedParents) != 0 || len(s.Patches) != 2 {
					t.Errorf("the annotation after the join: %+v; want the log's", s)
				}
				if st := statusOf(t); len(st.Mismatch) != 0 || st.Untrusted != "" {
					t.Errorf("after the join: mismatch %q, untrusted %q", st.Mismatch, st.Untrusted)
				}
			}},
		{name: "restore of a session edited behind it once Git caught up", setup: then(given(slices.Concat(breakglass, []string{"--expires", "1h"})), gitCatchesUp, editedBehind),
			args: []string{"restore", "web"}, assert: func(t *testing.T, f *fakeCluster, r cmdResult) {
				if r.code != ExitOK || !strings.Contains(r.errs, "warning: the session annotation disagrees with its audit records (see the note): session ") {
					t.Fatalf("restore: exit %d\n%s%s", r.code, r.out, r.errs)
				}
				assertLastSession("restored")(t, f, r)
				last := records(t, f)[len(records(t, f))-1]
				if last.Event != audit.EventRestored || last.Outcome.Status != audit.StatusSucceeded || !strings.Contains(last.Outcome.Error, "pausedParents (annotation [root], audit log [])") {
					t.Errorf("last record %s/%s %q; want restored, naming the disagreement", last.Event, last.Outcome.Status, last.Outcome.Error)
				}
				if policy, _, _ := unstructured.NestedMap(f.app().Object, "spec", "syncPolicy"); !strings.Contains(jsonText(policy), `"automated":{"prune":true,"selfHeal":true}`) {
					t.Errorf("restored policy %s", jsonText(policy))
				}
			}},
		{name: "restore while Git waits, whatever an edited annotation says", setup: then(given(breakglass), editedBehind, pendingPatchForged),
			args: []string{"restore", "web"}, assert: assertError(ExitFailure, "sync not restored, deployment.apps/web waiting")},
		{name: "restore of a session with a forged pending patch once Git caught up", setup: then(given(breakglass), gitCatchesUp, pendingPatchForged),
			args: []string{"restore", "web"}, assert: assertLastSession("restored")},
		{name: "status notices sync turned back on", setup: then(given(breakglass), gitCatchesUp, syncTurnedBackOn), args: []string{"status", "web", "--exit-code"},
			assert: assertError(ExitFailure, "automated sync is on again behind the session")},
		{name: "forced restore of a session whose sync was turned back on is forced", setup: then(given(breakglass), gitCatchesUp, syncTurnedBackOn),
			args: []string{"restore", "web", "--force", "--reason", "sync came back", "-y"},
			assert: assertCluster(func(t *testing.T, f *fakeCluster) {
				last := records(t, f)
				if r := last[len(last)-1]; r.Event != audit.EventForced || r.Reason != "sync came back" {
					t.Errorf("last record %s %q; want breakglass.forced with the reason given", r.Event, r.Reason)
				}
				if enabled, _, _ := unstructured.NestedBool(f.app().Object, "spec", "syncPolicy", "automated", "enabled"); !enabled {
					t.Errorf("the policy turned back on was rewritten: %v", f.app().Object["spec"])
				}
			})},
		{name: "restore refuses a session whose sync was turned back on", setup: then(given(breakglass), gitCatchesUp, syncTurnedBackOn), args: []string{"restore", "web"},
			assert: assertError(ExitFailure, "automated sync of web is on again, behind session")},
		{name: "join refuses a session whose sync was turned back on", setup: then(given(breakglass), syncTurnedBackOn),
			args:   []string{"breakglass", "web", "deployment/web", "--replicas", "4", "--reason", "more", "--join", "-y"},
			assert: assertError(ExitFailure, "a patch within it would be reverted")},
		{name: "status", setup: given(breakglass), args: []string{"status"}, assert: assertGolden("status.golden", ExitOK)},
		{name: "status wide", setup: given(breakglass), args: []string{"status", "-o", "wide"}, assert: assertGolden("status-wide.golden", ExitOK)},
		{name: "status app", setup: given(breakglass), args: []string{"status", "web"}, assert: assertGolden("status-app.golden", ExitOK)},
		{name: "status json", setup: given(breakglass), args: []string{"status", "-o", "json"}, assert: assertGolden("status-json.golden", ExitOK)},
		// APP names one Application in --app-namespace; -A lists every
		// namespace. status took both and ignored -A.
		{name: "status APP with all namespaces", args: []string{"status", "web", "-A"},
			assert: assertError(ExitUsage, "APP and --all-namespaces cannot be combined")},
		// Git caught up, Argo CD said so, then Git moved away from the
		// fix; someone removes restore's refresh request before Argo CD
		// answers it. Restore took the request's absence for a refresh and
		// re-enabled sync on the stale "caught up".
		{name: "restore refuses a refresh request removed unanswered",
			setup:  then(given(breakglass), gitCatchesUp, argoReconciles, aMinuteLater, func(_ *testing.T, f *fakeCluster) { f.forgeRefreshes() }, gitMovesAway),
			args:   []string{"restore", "web"},
			assert: assertError(ExitFailure, "the refresh request was removed before Argo CD's controller answered it")},
		// Someone removes each refresh request before Argo CD answers it.
		// Break-glass took the request's absence for Argo CD's look at the
		// patch, and recorded the pre-patch "Synced" as what Argo CD saw.
		{name: "breakglass does not take a removed refresh request for Argo CD's answer",
			setup: func(_ *testing.T, f *fakeCluster) { f.forgeRefreshes() }, args: breakglass,
			assert: func(t *testing.T, f *fakeCluster, r cmdResult) {
				if r.code != ExitOK || !strings.Contains(r.errs, "could not learn whether Argo CD sees the patch") {
					t.Errorf("exit %d, stderr %q; want 0 and a warning that Argo CD's view of the patch is unknown", r.code, r.errs)
				}
				for _, rec := range records(t, f) {
					if rec.Event == audit.EventPatched && rec.OutOfSync != nil {
						t.Errorf("patched record says Argo CD saw the target out of sync: %v; want it unsaid", *rec.OutOfSync)
					}
				}
			}},
		{name: "restore while Git waits", setup: given(breakglass), args: []string{"restore", "web"}, assert: assertGolden("restore-waiting.golden", ExitFailure)},
		// -o prints the state restore acted on, and refused on: it
		// printed nothing when Git was behind.
		{name: "restore --dry-run -o json while Git waits", setup: given(breakglass), args: []string{"restore", "web", "--dry-run", "-o", "json"},
			assert: func(t *testing.T, _ *fakeCluster, r cmdResult) {
				var st struct {
					Session *struct{ ID string }
					Git     string
					Ready   bool
				}
				if err := json.Unmarshal([]byte(r.out), &st); r.code != ExitFailure || err != nil || st.Session == nil || st.Session.ID == "" || st.Git != "waiting" || st.Ready || !strings.Contains(r.errs, "sync not restored") {
					t.Errorf("exit %d, stdout %q (%v), stderr %q; want the state as JSON and the refusal", r.code, r.out, err, r.errs)
				}
			}},
		{name: "restore", setup: then(given(breakglass), gitCatchesUp), args: []string{"restore", "web"}, assert: assertGolden("restore.golden", ExitOK)},
		{name: "restore puts the policy back", setup: then(given(breakglass), gitCatchesUp), args: []string{"restore", "web"},
			assert: assertCluster(func(t *testing.T, f *fakeCluster) {
				policy, _, _ := unstructured.NestedMap(f.app().Object, "spec", "syncPolicy")
				if !strings.Contains(jsonText(policy), `"automated":{"prune":true,"selfHeal":true}`) || !strings.Contains(jsonText(policy), "CreateNamespace=true") {
					t.Errorf("restored policy %s", jsonText(policy))
				}
			})},
		// The session annotation goes with the restore: the last-session
		// mark is what Argo CD's notifications announce the close by.
		{name: "restore leaves the last-session mark", setup: then(given(breakglass), gitCatchesUp), args: []string{"restore", "web"},
			assert: assertLastSession("restored")},
		{name: "forced restore leaves a forced last-session mark", setup: given(breakglass), args: []string{"restore", "web", "--force", "--reason", "abandoned", "-y"},
			assert: assertLastSession("forced")},
		{name: "ticket sync", setup: then(restored, jiraComesBack), args: []string{"ticket", "sync"}, assert: assertGolden("ticket-sync.golden", ExitOK)},
		{name: "ticket sync completes the log", setup: then(restored, jiraComesBack), args: []string{"ticket", "sync"},
			assert: assertCluster(func(t *testing.T, f *fakeCluster) {
				var events []string
				for _, r := range records(t, f) {
					events = append(events, string(r.Event)+"/"+r.Outcome.Status)
				}
				if want := "breakglass.planned/started,breakglass.paused/succeeded,breakglass.patched/succeeded,ticket.queued/queued," +
					"breakglass.restored/started,breakglass.restored/succeeded,ticket.filed/started,ticket.filed/succeeded"; strings.Join(events, ",") != want {
					t.Errorf("audit events\n %s\nwant\n %s", strings.Join(events, ","), want)
				}
			})},
		{name: "ticket sync leaves a log that verifies", setup: then(restored, jiraComesBack), args: []string{"ticket", "sync"},
			assert: assertCluster(func(t *testing.T, f *fakeCluster) {
				if rep, err := audit.VerifyStore(context.Background(), f.audit, nil, nil); err != nil || !rep.Intact() {
					t.Errorf("the audit log does not verify: %v %v", err, rep.Breaks)
				}
			})},
		// ticket sync works from the audit log: it took an --app-namespace
		// it never read.
		{name: "ticket sync takes no app namespace", args: []string{"ticket", "sync", "--app-namespace", "team-a"},
			assert: assertError(ExitUsage, "unknown flag: --app-namespace")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCluster(t)
			if tt.setup != nil {
				tt.setup(t, f)
			}
			r := cmdResult{args: tt.args}
			r.code, r.out, r.errs = runPlugin(t, tt.args...)
			tt.assert(t, f, r)
		})
	}
}

func records(t *testing.T, f *fakeCluster) []*audit.Record {
	t.Helper()
	entries, err := f.audit.Entries(context.Background(), audit.Filter{})
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nothing appended yet
	}
	if err != nil {
		t.Fatal(err)
	}
	return audit.Records(entries)
}

// fakeTickets is a Jira that files every ticket as OPS-1, OPS-2, … and
// remembers what it was asked.
type fakeTickets struct{ created, comments, closed []string }

func (j *fakeTickets) Create(_ context.Context, rc ticket.Reconcile) (ticket.Issue, error) {
	j.created = append(j.created, ticket.Summary(rc))
	key := "OPS-" + string(rune('0'+len(j.created)))
	return ticket.Issue{Key: key, URL: "https://jira.example/browse/" + key}, nil
}
func (j *fakeTickets) FindSession(context.Context, string) (ticket.Issue, bool, error) {
	return ticket.Issue{}, false, nil
}
func (j *fakeTickets) Get(_ context.Context, key string) (ticket.Issue, error) {
	return ticket.Issue{Key: key}, nil
}
func (j *fakeTickets) Comment(_ context.Context, key, body string) error {
	j.comments = append(j.comments, key)
	return nil
}
func (j *fakeTickets) Close(_ context.Context, key, comment string) error {
	j.closed = append(j.closed, key)
	return nil
}
func (j *fakeTickets) LinkTo(context.Context, string, string, string) error { return nil }
func (j *fakeTickets) Ready() error                                         { return nil }

var _ breakglass.Tickets = (*fakeTickets)(nil)

// TestEngineDecisionsOnFakes: a second break-glass on an open session is
// refused with the way on (join, or restore); --join patches within it;
// a forced restore needs a reason and is recorded as forced.
func TestEngineDecisionsOnFakes(t *testing.T) {
	f := newFakeCluster(t)
	patch := func(replicas string, extra ...string) []string {
		return append([]string{"breakglass", "web", "deployment/web", "--type", "merge", "--patch", `{"spec":{"replicas":` + replicas + `}}`, "--reason", "load", "-y"}, extra...)
	}
	if code, out, errOut := runPlugin(t, patch("3")...); code != ExitOK {
		t.Fatalf("break-glass: %d %s %s", code, out, errOut)
	}
	code, _, errOut := runPlugin(t, patch("4")...)
	if code != ExitFailure || !strings.Contains(errOut, "a break-glass session is already open on web") || !strings.Contains(errOut, "add --join to patch within it, or finish it with `kubectl gitops restore web`") {
		t.Errorf("a second break-glass: exit %d, %s", code, errOut)
	}
	if code, out, errOut := runPlugin(t, patch("4", "--join")...); code != ExitOK || !strings.Contains(out, "/spec/replicas: 3 -> 4") {
		t.Errorf("--join: exit %d, %s %s", code, out, errOut)
	}
	if code, _, errOut := runPlugin(t, "restore", "web", "--force"); code != ExitUsage || !strings.Contains(errOut, "--reason: a forced restore needs one") {
		t.Errorf("--force without --reason: exit %d, %s", code, errOut)
	}
	if code, out, errOut := runPlugin(t, "restore", "web", "--force", "--reason", "abandoned", "-y"); code != ExitOK || !strings.Contains(out, "forced restore of web") {
		t.Errorf("forced restore: exit %d, %s %s", code, out, errOut)
	}
	last := records(t, f)
	if r := last[len(last)-1]; r.Event != audit.EventForced || r.Outcome.Status != audit.StatusSucceeded || r.Reason != "abandoned" {
		t.Errorf("last record %s/%s %q, want a succeeded breakglass.forced with the reason", r.Event, r.Outcome.Status, r.Reason)
	}
	if _, open := f.app().GetAnnotations()[breakglass.SessionAnnotation]; open {
		t.Error("the session is still open after the forced restore")
	}
}

// TestDriftOutputOnFakes: drift's table, wide table and JSON, on the fake
// cluster with a fake Argo CD API answering managed-resources: a person
// scaled the Deployment and set its image, and an operator owns a label.
func TestDriftOutputOnFakes(t *testing.T) {
	f := newFakeCluster(t)
	deployments := f.dyn.Resource(deploymentsGVR).Namespace("demo")
	d, err := deployments.Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(d.Object, int64(5), "spec", "replicas")
	_ = unstructured.SetNestedSlice(d.Object, []any{map[string]any{"name": "web", "image": "registry.example/web:manual"}}, "spec", "template", "spec", "containers")
	// Times relative to now, so that the SINCE column reads the same on
	// every run.
	at := func(ago string) *metav1.Time {
		d, _ := time.ParseDuration(ago)
		mt := metav1.NewTime(time.Now().Add(-d).Truncate(time.Second))
		return &mt
	}
	d.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "argocd-controller", Operation: "Update", Time: at("50h"), FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:name":{}}}}}}}`)}},
		{Manager: "kubectl", Operation: "Update", Subresource: "scale", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}},
		{Manager: "kubectl-set", Operation: "Update", Time: at("3h30m"), FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{"f:image":{}}}}}}}`)}},
		{Manager: "label-operator", Operation: "Update", Time: at("25m"), FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:tier":{}}}}`)}},
	})
	if _, err := deployments.Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	state := func(replicas int, image, tier string) string {
		b, _ := json.Marshal(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": "demo", "labels": map[string]any{"tier": tier}},
			"spec":     map[string]any{"replicas": replicas, "template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": image}}}}}})
		return string(b)
	}
	fakeArgoAPI(t, map[string]any{
		"group": "apps", "kind": "Deployment", "namespace": "demo", "name": "web", "modified": true,
		"targetState":         state(2, "registry.example/web:1.0.0", "web"),
		"predictedLiveState":  state(2, "registry.example/web:1.0.0", "web"),
		"normalizedLiveState": state(5, "registry.example/web:manual", "frontend"),
	})

	runGolden(t, "drift.golden", ExitOK, "drift", "web")
	runGolden(t, "drift-wide.golden", ExitOK, "drift", "web", "-o", "wide")
	runGolden(t, "drift-json.golden", ExitFailure, "drift", "web", "-o", "json", "--exit-code")
}

// TestDebtAndContractOutputOnFakes: debt's and contract check's table and
// JSON, on the fake cluster: two ignoreDifferences entries, one owned; a
// namespace expecting self-heal off under a self-healing Application.
func TestDebtAndContractOutputOnFakes(t *testing.T) {
	f := newFakeCluster(t)
	ctx := context.Background()
	owned := map[string]any{"group": "apps", "kind": "Deployment", "jsonPointers": []any{"/spec/replicas"}}
	notes, _ := json.Marshal(map[string]any{drift.DebtID(owned): map[string]any{"owner": "team-payments", "reason": "the HPA owns replicas", "review": "2099-01-01"}})
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{drift.DebtAnnotation: string(notes)}},
		"spec":     map[string]any{"ignoreDifferences": []any{owned, map[string]any{"kind": "Service", "jsonPointers": []any{"/spec/ports"}}}},
	})
	if _, err := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd").Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	runGolden(t, "debt.golden", ExitFailure, "debt", "web", "--exit-code")
	runGolden(t, "debt-json.golden", ExitOK, "debt", "web", "-o", "json")

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo", Annotations: map[string]string{drift.ContractSelfHeal: "off", drift.ContractPatches: drift.PatchesBreakGlass}}}
	if _, err := f.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runGolden(t, "contract-check.golden", ExitFailure, "contract", "check", "-A", "--exit-code")
	runGolden(t, "contract-check-json.golden", ExitOK, "contract", "check", "web", "-o", "json")
	// The same contract refuses a break-glass by a group it does not name.
	ns.Annotations[drift.ContractGroups] = "sre"
	if _, err := f.kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	runGolden(t, "breakglass-contract.golden", ExitFailure, "breakglass", "web", "deployment/web", "--type", "merge", "--patch", `{"spec":{"replicas":3}}`, "--reason", "r", "--dry-run")
}

// fakeArgoAPI serves Argo CD's managed-resources for Application web with
// items, and points the plugin at it.
func fakeArgoAPI(t *testing.T, items ...any) {
	t.Helper()
	argo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/applications/web/managed-resources" || r.URL.Query().Get("appNamespace") != "argocd" {
			t.Errorf("unexpected Argo CD API request %s", r.URL)
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"items": items})
	}))
	t.Cleanup(argo.Close)
	t.Setenv("ARGOCD_SERVER", strings.TrimPrefix(argo.URL, "http://"))
	t.Setenv("ARGOCD_AUTH_TOKEN", "token-not-printed")
	t.Setenv("ARGOCD_OPTS", "--plaintext")
}

// TestDriftTrustsNoClaimsAndLeaksNoSecrets: a manager calling itself
// kubectl-gitops without a session that patched the field is shown as
// manual; managedFields that were reset name nobody; a deleted resource is
// drift; a password passed as the argument after its flag is redacted.
func TestDriftTrustsNoClaimsAndLeaksNoSecrets(t *testing.T) {
	f := newFakeCluster(t)
	deployments := f.dyn.Resource(deploymentsGVR).Namespace("demo")
	d, err := deployments.Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "kubectl-gitops", Operation: "Update", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{"f:image":{},"f:args":{}}}}}}}`)}},
	})
	if _, err := deployments.Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	state := func(image, password string) string {
		b, _ := json.Marshal(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web", "namespace": "demo"},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": image, "args": []any{"--db-password", password}}}}}}})
		return string(b)
	}
	gone := `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"web","namespace":"demo"}}`
	fakeArgoAPI(t, map[string]any{
		"group": "apps", "kind": "Deployment", "namespace": "demo", "name": "web", "modified": true, "targetState": state("r/web:1", "old-pass-1"),
		"predictedLiveState": state("r/web:1", "old-pass-1"), "normalizedLiveState": state("r/web:2", "new-pass-2"),
	}, map[string]any{
		"group": "policy", "kind": "PodDisruptionBudget", "namespace": "demo", "name": "web", "modified": true, "targetState": gone, "normalizedLiveState": "null",
	})
	code, out, errOut := runPlugin(t, "drift", "web", "-o", "json")
	if code != ExitOK {
		t.Fatalf("drift: exit %d: %s", code, errOut)
	}
	if strings.Contains(out, "new-pass-2") || strings.Contains(out, "old-pass-1") {
		t.Errorf("a password reached drift's output:\n%s", out)
	}
	var reports []*drift.Report
	if err := json.Unmarshal([]byte(out), &reports); err != nil {
		t.Fatal(err)
	}
	classes := map[string]drift.Class{}
	for _, f := range reports[0].Fields {
		classes[f.Resource.Kind+" "+f.Path] = f.Class
	}
	if classes["Deployment /spec/template/spec/containers/web/image"] != drift.Manual || classes["PodDisruptionBudget "] != drift.Deleted {
		t.Errorf("classes %v", classes)
	}
	if !strings.Contains(strings.Join(reports[0].Notes, "\n"), `written by manager "kubectl-gitops", which no open break-glass session patched`) {
		t.Errorf("notes %v", reports[0].Notes)
	}

	d, _ = deployments.Get(context.Background(), "web", metav1.GetOptions{})
	d.SetManagedFields(nil)
	if _, err := deployments.Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, out, _ = runPlugin(t, "drift", "web", "-o", "json")
	if !strings.Contains(out, `"class": "unknown"`) || strings.Contains(out, `"class": "defaulted"`) || !strings.Contains(out, "has no managedFields (they were reset)") {
		t.Errorf("reset managedFields:\n%s", out)
	}
}

// TestBreakglassReadsTheApplicationOnce: the Application is read by the
// plan, and every later write starts from the copy the command last saw
// (the plan's, the one the controller's confirmation delivered), read again
// only when a write made it stale: the time to a live fix is not spent
// re-reading it.
func TestBreakglassReadsTheApplicationOnce(t *testing.T) {
	f := newFakeCluster(t)
	f.dyn.ClearActions()
	runPlugin(t, "breakglass", "web", "deployment/web", "--type", "merge", "--patch", `{"spec":{"replicas":3}}`, "--reason", "5xx spike", "-y")
	reads := 0
	for _, a := range f.dyn.Actions() {
		if a.GetVerb() == "get" && a.GetResource() == argocd.ApplicationGVR {
			reads++
		}
	}
	if reads > 2 {
		t.Errorf("the Application was read %d times, want the plan's read and at most one after the session write made it stale", reads)
	}
}

// TestRestoreRefusesAStaleCaughtUp: Git held the fix at the last reconcile,
// then lost it, and the controller does not get to the refresh restore
// asks for. Restore must not re-enable sync on the stale "caught-up" (that
// would revert the fix), and status --exit-code must not call it caught up.
func TestRestoreRefusesAStaleCaughtUp(t *testing.T) {
	f := newFakeCluster(t)
	runPlugin(t, "breakglass", "web", "deployment/web", "--type", "merge", "--patch", `{"spec":{"replicas":3}}`, "--reason", "5xx spike", "-y")
	f.commit("2222222222222222222222222222222222222222", 3)
	if code, out, errOut := runPlugin(t, "status", "web"); code != ExitOK || !strings.Contains(out, "caught-up") {
		t.Fatalf("status before the stall: exit %d\n%s%s", code, out, errOut)
	}
	f.stall()
	time.Sleep(300 * time.Millisecond)                      // a reconcile already under way ends first
	f.commit("3333333333333333333333333333333333333333", 2) // the fix is reverted in Git
	if code, out, errOut := runPlugin(t, "status", "--exit-code", "--refresh-timeout", "1s"); code != ExitFailure {
		t.Errorf("status --exit-code on a state the controller did not refresh: exit %d, want %d\n%s%s", code, ExitFailure, out, errOut)
	}
	code, _, errOut := runPlugin(t, "restore", "web")
	if code != ExitFailure || !strings.Contains(errOut, "did not refresh web in time") {
		t.Errorf("restore on a stale caught-up: exit %d, want %d refusing\n%s", code, ExitFailure, errOut)
	}
	if _, open := f.app().GetAnnotations()[breakglass.SessionAnnotation]; !open {
		t.Error("restore closed the session on a state the controller never refreshed")
	}
}

// TestStatusWaitsForTheRefreshWhenItsAnswerDecides: a listing reports at
// once, but --exit-code, --wait and --watch, like a named Application, wait
// for the refresh, since their answer is acted on.
func TestStatusWaitsForTheRefreshWhenItsAnswerDecides(t *testing.T) {
	for _, tt := range []struct {
		name string
		o    StatusOptions
		want time.Duration
	}{
		{"listing", StatusOptions{}, 0},
		{"one application", StatusOptions{App: "web"}, defaultRefreshWait},
		{"--exit-code", StatusOptions{ExitCode: true}, defaultRefreshWait},
		{"--wait", StatusOptions{Wait: true}, defaultRefreshWait},
		{"--watch", StatusOptions{Watch: true}, defaultRefreshWait},
		{"listing with --refresh-timeout 5s", StatusOptions{RefreshTimeout: 5 * time.Second, refreshSet: true}, 5 * time.Second},
		{"one application with --refresh-timeout 0", StatusOptions{App: "web", refreshSet: true}, 0},
	} {
		if got := tt.o.refresh(); !got.Request || got.Wait != tt.want {
			t.Errorf("%s: %+v, want a request waiting %s", tt.name, got, tt.want)
		}
	}
}

// TestBreakglassRefusesAnApplicationAlreadyPaused: with automated sync
// already off and no session, there is no pause to make, and the admission
// policy lets no session open on a paused Application (one could be swapped
// for another): the break-glass says so before writing anything.
func TestBreakglassRefusesAnApplicationAlreadyPaused(t *testing.T) {
	f := newFakeCluster(t)
	app := f.app()
	if err := unstructured.SetNestedField(app.Object, false, "spec", "syncPolicy", "automated", "enabled"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd").Update(context.Background(), app, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "r", "-y")
	if code != ExitFailure || !strings.Contains(errOut, "automated sync is already off on web") || len(records(t, f)) != 0 {
		t.Errorf("exit %d, %q, %d records", code, errOut, len(records(t, f)))
	}
}

// TestRecordedValuesAuditorsNeed: only what the Deployment's schema keeps
// is recorded, and the changes an auditor must see keep their values: an
// image, a replica count and a resource limit.
func TestRecordedValuesAuditorsNeed(t *testing.T) {
	newFakeCluster(t)
	patch := `[{"op":"replace","path":"/spec/replicas","value":4},` +
		`{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"registry.example/web:1.2.4"},` +
		`{"op":"add","path":"/spec/template/spec/containers/0/resources","value":{"limits":{"memory":"512Mi"}}},` +
		`{"op":"add","path":"/spec/template/spec/containers/0/workingDir","value":"/srv/not-on-the-allow-list"}]`
	runGolden(t, "breakglass-recorded-values.golden", ExitOK, "breakglass", "web", "deployment/web", "--type", "json", "--patch", patch, "--reason", "values", "--dry-run", "-o", "json")
}

// TestReadyIsTheOneDecision: READY and --exit-code used to read different
// fields, so a listing as of Argo CD's last reconcile could say READY yes
// while --exit-code exited 1. Both ask Restorable now.
func TestReadyIsTheOneDecision(t *testing.T) {
	for name, tc := range map[string]struct {
		st    breakglass.SessionStatus
		ready string
		exit  bool
	}{
		"caught up after a refresh":          {breakglass.SessionStatus{Ready: true}, "yes", true},
		"caught up as of the last reconcile": {breakglass.SessionStatus{Ready: true, Stale: true}, "stale", false},
		"not caught up":                      {breakglass.SessionStatus{}, "no", false},
		// A field of the annotation the log contradicts is named only:
		// the session judged is the log's.
		"a field of the annotation disagrees":       {breakglass.SessionStatus{Ready: true, Mismatch: []string{"patches"}}, "yes", true},
		"the annotation names another session":      {breakglass.SessionStatus{Ready: true, Untrusted: "the audit log's open session on web is s"}, "no", false},
		"another session, as of the last reconcile": {breakglass.SessionStatus{Ready: true, Stale: true, Untrusted: "closed"}, "no", false},
	} {
		st := tc.st
		if got := readyColumn(&st); got != tc.ready || allReady([]*breakglass.SessionStatus{&st}) != tc.exit || st.Restorable() != tc.exit {
			t.Errorf("%s: READY %s, exit-code ready %v; want %s, %v", name, got, allReady([]*breakglass.SessionStatus{&st}), tc.ready, tc.exit)
		}
	}
}

// assertLastSession checks that the Application's session is closed and
// the last-session mark names it, closed as want.
func assertLastSession(want string) func(*testing.T, *fakeCluster, cmdResult) {
	return assertCluster(func(t *testing.T, f *fakeCluster) {
		annotations := f.app().GetAnnotations()
		if _, open := annotations[breakglass.SessionAnnotation]; open {
			t.Fatalf("the session is still open: %v", annotations)
		}
		var opened string
		for _, r := range records(t, f) {
			if r.Event == audit.EventPlanned {
				opened = r.Session
			}
		}
		if got, wantMark := annotations[breakglass.LastSessionAnnotation], `{"id":"`+opened+`","closed":"`+want+`"}`; opened == "" || got != wantMark {
			t.Errorf("last-session mark %q; want %q", got, wantMark)
		}
	})
}

// TestStatusWatchEndsQuietlyOnCtrlC: Ctrl-C, the documented way to stop
// --watch, cancels the context; it printed "error: context canceled" and
// exited 1. It exits 0 with nothing on stderr.
func TestStatusWatchEndsQuietlyOnCtrlC(t *testing.T) {
	f := newFakeCluster(t)
	given([]string{"breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "-y"})(t, f)
	for _, after := range []time.Duration{50 * time.Millisecond, 4 * time.Second} { // during the first look, and between looks
		streams, _, _, errOut := genericiooptions.NewTestIOStreams()
		cmd := NewCmdRoot(testFactory(t, streams))
		cmd.SetArgs([]string{"status", "--watch"})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(after, cancel)
		if code := Execute(ctx, cmd, streams); code != ExitOK || errOut.Len() != 0 {
			t.Errorf("Ctrl-C after %s: exit %d, stderr %q; want 0 and nothing", after, code, errOut)
		}
	}
}

// TestPromptsGoToStderr: a confirmation is asked on stderr, so that
// `restore web --force --reason x -o json > f` shows its prompt and f
// holds only JSON. The prompt went to stdout: the command looked hung and
// the prompt landed in the file.
func TestPromptsGoToStderr(t *testing.T) {
	for _, args := range [][]string{
		{"restore", "web", "--force", "--reason", "abandoned", "-o", "json"},
		{"breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "-o", "json"},
	} {
		t.Run(args[0], func(t *testing.T) {
			f := newFakeCluster(t)
			if args[0] == "restore" {
				given([]string{"breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "-y"})(t, f)
			}
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			typed, typing := io.Pipe()
			streams.In = typed
			previous := isTerminal
			isTerminal = func(stream any) bool { return stream == streams.In } // typed at a terminal, output redirected
			t.Cleanup(func() { isTerminal = previous })
			go func() {
				time.Sleep(500 * time.Millisecond) // once the prompt is drawn
				_, _ = typing.Write([]byte("web\r"))
			}()
			cmd := NewCmdRoot(testFactory(t, streams))
			cmd.SetArgs(args)
			if code := Execute(context.Background(), cmd, streams); code != ExitOK {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
			}
			var v any
			if err := json.Unmarshal(out.Bytes(), &v); err != nil {
				t.Errorf("stdout is not only JSON (%v):\n%s", err, out)
			}
			if !strings.Contains(errOut.String(), "Type the Application name (web) to go ahead") {
				t.Errorf("the prompt is not on stderr:\n%s", errOut)
			}
			// The plan went to the redirected stdout: nothing is "above".
			if strings.Contains(errOut.String(), "plan above") {
				t.Errorf("the prompt points at a plan the person does not see:\n%s", errOut)
			}
		})
	}
}

// TestTheFormAsksOnlyWhoMayAct (issue 50, item 7): in a terminal, a
// break-glass with the change and the reason left out asks for them; one
// who may not patch the target is told so before the first question, not
// after answering them all.
func TestTheFormAsksOnlyWhoMayAct(t *testing.T) {
	f := newFakeCluster(t)
	f.kube.PrependReactor("create", "selfsubjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		review := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		allowed := review.Spec.ResourceAttributes.Resource != "deployments"
		return true, &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: allowed}}, nil
	})
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	typed, typing := io.Pipe()
	streams.In = typed
	// A form drawn is aborted (ctrl-c) after a while; one never drawn
	// reads nothing.
	go func() {
		time.Sleep(2 * time.Second)
		_, _ = typing.Write([]byte{3})
		typing.Close()
	}()
	previous := isTerminal
	isTerminal = func(any) bool { return true }
	t.Cleanup(func() { isTerminal = previous })
	cmd := NewCmdRoot(testFactory(t, streams))
	cmd.SetArgs([]string{"breakglass", "web", "deployment/web"})
	code := Execute(context.Background(), cmd, streams)
	if code == ExitOK || !strings.Contains(errOut.String(), "you may not patch deployments.apps") {
		t.Fatalf("exit %d, want the refusal\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if strings.Contains(errOut.String(), "Reason") || strings.Contains(errOut.String(), "replicas") {
		t.Errorf("the form asked before it refused:\n%s", errOut)
	}
	if s := sessionOn(t, f); s != nil {
		t.Errorf("a session was opened: %+v", s)
	}
}

// TestSecretTextIsRefused: a reason, an incident, a forced restore's
// reason or a review note holding a secret is refused before anything is
// written, naming the rule and the flag; --allow-secret-text writes it
// redacted, and the records say it was confirmed.
func TestSecretTextIsRefused(t *testing.T) {
	f := newFakeCluster(t)
	const token = "Zq8vN3xLp0Rt7YwK2mHs9DcF4gJb"
	change := []string{"breakglass", "web", "deployment/web", "--replicas", "3", "-y"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(change, "--reason", "leak of "+token), "error: --reason: looks like it holds a secret (rule high-entropy-string)"},
		{append(change, "--reason", "r", "--incident", "INC-1 pw=hunter2"), "error: --incident: looks like it holds a secret (rule secret-assignment)"},
		{[]string{"restore", "web", "--force", "--reason", "the password is hunter2", "-y"}, "error: --reason: looks like it holds a secret (rule password-phrase)"},
		{[]string{"audit", "review", "some-session", "--approve", "--note", "see https://hooks.slack.com/services/T0001/B0001/abcdefghijklmnopqrstuvwx"}, "error: --note: looks like it holds a secret (rule slack-webhook-url)"},
	} {
		code, out, errOut := runPlugin(t, tc.args...)
		if code != ExitUsage || !strings.HasPrefix(errOut, tc.want) || !strings.HasSuffix(errOut, "pass --allow-secret-text\n") || strings.Contains(errOut, redact.Redacted) || strings.Count(errOut, "\n") != 1 ||
			strings.Contains(out+errOut, token) || strings.Contains(out+errOut, "hunter2") {
			t.Errorf("%v: exit %d\nstdout: %s\nstderr: %s", tc.args, code, out, errOut)
		}
	}
	if n := len(records(t, f)); n != 0 {
		t.Fatalf("a refused text wrote %d records", n)
	}
	if code, out, errOut := runPlugin(t, append(change, "--reason", "r", "--incident", "INC-1 pw=hunter2", "--allow-secret-text")...); code != ExitOK {
		t.Fatalf("--allow-secret-text: exit %d, %s %s", code, out, errOut)
	}
	recs := records(t, f)
	for _, r := range recs {
		want := &audit.TextCheck{Confirmed: true, Findings: []audit.TextFinding{{Input: "incident", Rule: "secret-assignment"}}}
		if strings.Contains(r.Incident, "hunter2") || !reflect.DeepEqual(r.TextCheck, want) {
			t.Errorf("%s record: incident %q, text check %+v", r.Event, r.Incident, r.TextCheck)
		}
	}
	if len(recs) == 0 {
		t.Error("no records")
	}
}

// TestEveryCommandExplainsItsErrors: the next step for an engine error is
// added once, in run(), for every command. Only breakglass, restore,
// propose and review added hints; drift, debt and the others printed a
// missing Application's error with no next step.
func TestEveryCommandExplainsItsErrors(t *testing.T) {
	for _, args := range [][]string{
		{"breakglass", "nosuch", "deployment/web", "--replicas", "3", "--reason", "load", "-y"},
		{"debt", "nosuch"},
		{"drift", "nosuch"},
		{"restore", "nosuch"},
		{"propose", "nosuch"},
	} {
		t.Run(args[0], func(t *testing.T) {
			newFakeCluster(t)
			streams, _, _, errOut := genericiooptions.NewTestIOStreams()
			cmd := NewCmdRoot(testFactory(t, streams))
			cmd.SetArgs(args)
			if code := Execute(context.Background(), cmd, streams); code == ExitOK {
				t.Fatalf("exit 0 for a missing Application")
			}
			if !strings.Contains(errOut.String(), "set --app-namespace if Applications live elsewhere") {
				t.Errorf("no next step:\n%s", errOut)
			}
		})
	}
}

// TestBreakglassWaitsForArgoCDWithoutThePauseGuard: without the admission
// policy that refuses a stale reconcile's automated sync (its binding gone,
// or unreadable), nothing stops that sync from applying Git over the fix
// if the patch goes before Argo CD's controller has taken the pause up: the
// plan says so, and the pause is confirmed before the patch.
func TestBreakglassWaitsForArgoCDWithoutThePauseGuard(t *testing.T) {
	for _, tt := range []struct {
		name    string
		remove  bool
		warning bool
	}{{"as installed", false, false}, {"binding gone", true, true}} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCluster(t)
			if tt.remove {
				if err := f.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), breakglass.PauseGuardPolicy, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			f.dyn.ClearActions()
			code, out, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "5xx spike", "-y")
			if code != ExitOK {
				t.Fatalf("exit %d\n%s%s", code, out, errOut)
			}
			if got := strings.Contains(errOut, breakglass.PauseGuardPolicy+" is not in force"); got != tt.warning {
				t.Errorf("warning about the pause guard: %v, want %v\n%s", got, tt.warning, errOut)
			}
			// Without the guard, the Deployment is patched only after Argo
			// CD's (fake) controller has reconciled the paused Application:
			// its own write, which the tool's (field manager kubectl-gitops)
			// are not.
			paused, confirmed, patched := -1, -1, -1
			for i, a := range f.dyn.Actions() {
				patch, ok := a.(clienttesting.PatchActionImpl)
				if !ok || a.GetVerb() != "patch" {
					continue
				}
				tool := patch.GetPatchOptions().FieldManager == argocd.FieldManager
				switch {
				case paused < 0 && tool && a.GetResource() == argocd.ApplicationGVR:
					paused = i
				case paused >= 0 && confirmed < 0 && !tool && a.GetResource() == argocd.ApplicationGVR:
					confirmed = i
				case patched < 0 && a.GetResource().Resource == "deployments":
					patched = i
				}
			}
			if tt.warning && (confirmed < 0 || patched < confirmed) {
				t.Errorf("without the guard the Deployment was patched (action %d) before Argo CD confirmed the pause (action %d, paused at %d)", patched, confirmed, paused)
			}
		})
	}
}

// TestATokenAsTheRepoURLsUserIsNotRecorded: GitHub's documented forms of
// a token in a repository URL (as the user name, with x-oauth-basic or
// alone as the password) stay out of the pinned source the planned record
// keeps: the redaction took the password out and kept the user name.
func TestATokenAsTheRepoURLsUserIsNotRecorded(t *testing.T) {
	const token = "s3cr3tT0k"
	for _, url := range []string{"https://" + token + ":x-oauth-basic@github.com/org/apps.git", "https://" + token + "@github.com/org/apps.git"} {
		f := newFakeCluster(t)
		app := f.app()
		if err := unstructured.SetNestedField(app.Object, url, "spec", "source", "repoURL"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd").Update(context.Background(), app, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if code, out, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "r", "-y"); code != ExitOK {
			t.Fatalf("%s: exit %d: %s %s", url, code, out, errOut)
		}
		raw, err := os.ReadFile(f.audit.Path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), token) || !strings.Contains(string(raw), "github.com/org/apps.git") {
			t.Errorf("%s: the audit log keeps the token, or no pinned source:\n%s", url, raw)
		}
	}
}

// TestAPauseAccountedForByRecordsAloneIsNamed: two records in one's own
// name (a plan on an Application that does not exist, or one that does
// not carry the session, and a pause of "other") accounted for a silent
// pause of "other" marked CHILD/ID: the child must exist and carry the
// session.
func TestAPauseAccountedForByRecordsAloneIsNamed(t *testing.T) {
	for _, tt := range []struct {
		child, want string
	}{
		{"ghost", "whose Application argocd/ghost does not exist"},
		{"web", "which argocd/web does not carry"},
	} {
		f := newFakeCluster(t)
		const id = "20261207-031500-mal01"
		mallory := audit.Actor{Username: "mallory", Groups: []string{"oncall"}}
		for _, r := range []*audit.Record{
			{Event: audit.EventPlanned, Session: id, Actor: mallory, Reason: "r", Application: &audit.AppRef{Namespace: "argocd", Name: tt.child}, Outcome: audit.Outcome{Status: audit.StatusStarted}},
			{Event: audit.EventPaused, Session: id, Actor: mallory, Reason: "r", Application: &audit.AppRef{Namespace: "argocd", Name: "other"}, Outcome: audit.Outcome{Status: audit.StatusSucceeded}},
		} {
			if err := f.audit.Append(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}
		other := f.app().DeepCopy()
		other.SetName("other")
		other.SetResourceVersion("")
		other.SetAnnotations(map[string]string{breakglass.PausedByAnnotation: tt.child + "/" + id})
		_ = unstructured.SetNestedField(other.Object, false, "spec", "syncPolicy", "automated", "enabled")
		if _, err := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd").Create(context.Background(), other, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runPlugin(t, "contract", "check", "--exit-code")
		if code != ExitFailure || !strings.Contains(errOut, `application argocd/other is marked paused for session "`+tt.child+"/"+id+`", `+tt.want) {
			t.Errorf("%s: exit %d, stderr %q; want the pause named, %q", tt.child, code, errOut, tt.want)
		}
	}
}

// TestAForeignHoldEntryIsNamedAndClosedOut: within a --hold sync session a
// member appended an ignoreDifferences entry of their own (the policy
// lets entries grow within a session): Argo CD compared .spec.replicas no
// more, an honest restore said Git had caught up, re-enabled sync and
// left the entry for good. It is a named mismatch, Synced proves nothing
// while it stands, and the close puts back the Application's own entries.
func TestAForeignHoldEntryIsNamedAndClosedOut(t *testing.T) {
	f := newFakeCluster(t)
	own := map[string]any{"group": "autoscaling", "kind": "HorizontalPodAutoscaler", "name": "web", "jsonPointers": []any{"/spec/minReplicas"}}
	app := f.app()
	if err := unstructured.SetNestedSlice(app.Object, []any{own}, "spec", "ignoreDifferences"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd").Update(context.Background(), app, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "--hold", "sync", "-y"); code != ExitOK {
		t.Fatalf("break-glass: %d %s %s", code, out, errOut)
	}
	foreign := map[string]any{"group": "apps", "kind": "Deployment", "name": "web", "jqPathExpressions": []any{".spec.replicas"}}
	app = f.app()
	_ = unstructured.SetNestedSlice(app.Object, []any{own, foreign}, "spec", "ignoreDifferences")
	if _, err := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd").Update(context.Background(), app, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	gitCatchesUp(t, f)
	code, out, errOut := runPlugin(t, "status", "web", "-o", "json", "--exit-code")
	if code != ExitFailure || !strings.Contains(out, `neither the Application's own when the session opened nor its hold's`) || !strings.Contains(out, `"ready": false`) {
		t.Errorf("status with a foreign entry: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := runPlugin(t, "restore", "web"); code != ExitFailure {
		t.Errorf("restore with a foreign entry: exit %d, %s; want refused", code, errOut)
	}
	if code, out, errOut := runPlugin(t, "restore", "web", "--force", "--reason", "entry planted", "-y"); code != ExitOK {
		t.Fatalf("forced restore: %d %s %s", code, out, errOut)
	}
	left, _, _ := unstructured.NestedSlice(f.app().Object, "spec", "ignoreDifferences")
	if !reflect.DeepEqual(left, []any{own}) {
		t.Errorf("after the close ignoreDifferences is %v, want the Application's own %v", left, own)
	}
}

// TestTheFormOffersWhatTheTargetTakes: an image where the kind has a pod
// template, replicas where it scales, a patch always: a ConfigMap was
// offered an image and replicas.
func TestTheFormOffersWhatTheTargetTakes(t *testing.T) {
	for target, want := range map[string][]string{
		"deployment/web":       {"image", "replicas", "patch"},
		"sts.apps/db":          {"image", "replicas", "patch"},
		"daemonset/agent":      {"image", "patch"},
		"cronjob/nightly":      {"image", "patch"},
		"configmap/web-cfg":    {"patch"},
		"service/web":          {"patch"},
		"ingress.networking/x": {"patch"},
	} {
		var got []string
		for _, o := range changesOf(target) {
			got = append(got, o.Value)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the form offers %v, want %v", target, got, want)
		}
	}
}
