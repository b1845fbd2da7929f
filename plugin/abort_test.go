package plugin

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
)

// killSwitch plays a break-glass process killed before its k-th audit
// record: that append and every write of the process after it fail, as
// if nothing after that point ran. Argo CD's controller lives on.
type killSwitch struct {
	audit.Store
	mu      sync.Mutex
	appends int
	at      int
}

var errKilled = errors.New("killed")

func (k *killSwitch) dead() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.at > 0 && k.appends >= k.at
}

func (k *killSwitch) Append(ctx context.Context, r *audit.Record) error {
	k.mu.Lock()
	k.appends++
	k.mu.Unlock()
	if k.dead() {
		return errKilled
	}
	return k.Store.Append(ctx, r)
}

// TestAnAbortKilledAnywhereLeavesNoApplicationHeldForNobody: a break-glass
// whose patch the API server rejects undoes its pause. Killed at any
// point, the log and the Application must agree on who holds it: the
// undo came before breakglass.aborted was written, so a kill between the
// two left the log holding the Application for a session the Application
// no longer carried, and the next break-glass there was an overlapping
// session in the log.
// killAt makes the engines of t write f's audit log through a kill
// switch that fails every append from the at-th on.
func killAt(t *testing.T, f *fakeCluster, at int) *killSwitch {
	kill := &killSwitch{Store: f.audit, at: at}
	stored, _ := testEngines.Load(t.Name())
	build := stored.(func(*engineFlags) (*breakglass.Engine, error))
	useEngine(t, func(flags *engineFlags) (*breakglass.Engine, error) {
		e, err := build(flags)
		if err == nil {
			e.Audit = kill
		}
		return e, err
	})
	return kill
}

func TestAnAbortKilledAnywhereLeavesNoApplicationHeldForNobody(t *testing.T) {
	for at := 1; ; at++ {
		var finished bool
		t.Run("", func(t *testing.T) {
			f := newFakeCluster(t)
			kill := killAt(t, f, at)
			f.dyn.PrependReactor("patch", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web", nil)
			})
			f.dyn.PrependReactor("patch", "applications", func(a clienttesting.Action) (bool, runtime.Object, error) {
				reconcile := strings.Contains(string(a.(clienttesting.PatchAction).GetPatch()), "reconciledAt")
				if kill.dead() && !reconcile {
					return true, nil, errKilled
				}
				return false, nil, nil
			})
			if code, out, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "-y"); code == ExitOK {
				t.Fatalf("a rejected patch exited 0\n%s%s", out, errOut)
			}
			finished = !kill.dead()

			entries, err := f.audit.Entries(context.Background(), audit.Filter{})
			if err != nil && !errors.Is(err, fs.ErrNotExist) { // killed before the first record
				t.Fatal(err)
			}
			_, sessions := audit.Legal(audit.Records(entries))
			holder := sessions.Holder(audit.AppRef{Namespace: "argocd", Name: "web"})
			carried := ""
			if s, err := breakglass.SessionOf(f.app()); err == nil {
				carried = s.ID
			}
			if holder != "" && holder != carried {
				t.Errorf("killed at record %d: the log holds web for session %s, web carries %q", at, holder, carried)
			}
		})
		if finished || at > 20 {
			break
		}
	}
}

// TestPauseRecordFailingLeavesNoPendingMark: the pause writes the patch's
// pending mark with it; when the pause's own record then cannot be
// written, nothing is patched, and the mark goes, or it would hold every
// restore while the run looked alive. The pause stays for restore to end.
func TestPauseRecordFailingLeavesNoPendingMark(t *testing.T) {
	f := newFakeCluster(t)
	killAt(t, f, 2) // the planned record is written, the paused one is not
	code, _, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "-y")
	if code == ExitOK || !strings.Contains(errOut, "nothing was patched, and sync stays paused") {
		t.Fatalf("exit %d, %q", code, errOut)
	}
	s, err := breakglass.SessionOf(f.app())
	if err != nil {
		t.Fatalf("the pause's session is gone: %v", err)
	}
	for _, p := range s.Patches {
		t.Errorf("the session keeps patch %s (pending %v) of a run that patched nothing", p.ID, p.Pending)
	}
	d, err := f.dyn.Resource(deploymentsGVR).Namespace("demo").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas"); replicas != 2 {
		t.Errorf("replicas %d: patched although its run failed before the patch", replicas)
	}
}

// TestAnAbortThatCannotDropTheSessionKeepsItForRestore: with a
// self-healing parent, the child's session is written before the parents
// are paused. When the child's own pause then fails, the abort puts the
// parents back and removes the session; when that removal fails too, the
// Application keeps a session annotation. The abort used to be recorded
// as a close regardless: the log held the Application for no one while it
// carried the session, which restore refused (no open session) and which
// refused every new break-glass there ("a session was opened meanwhile"),
// until a cluster admin removed it. Now the abort says the pause was not
// undone, the log keeps the session, and restore ends it.
func TestAnAbortThatCannotDropTheSessionKeepsItForRestore(t *testing.T) {
	f := newFakeCluster(t)
	ctx := context.Background()
	apps := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd")
	// The parent: a self-healing Application like web, deploying the
	// directory that holds web's Application.
	root := f.app().DeepCopy()
	root.SetName("root")
	root.SetResourceVersion("")
	unstructured.RemoveNestedField(root.Object, "status")
	if err := unstructured.SetNestedField(root.Object, "apps", "spec", "source", "path"); err != nil {
		t.Fatal(err)
	}
	if _, err := apps.Create(ctx, root, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web, err := apps.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	web.SetAnnotations(map[string]string{"argocd.argoproj.io/tracking-id": "root:argoproj.io/Application:argocd/web"})
	web.SetLabels(map[string]string{"app.kubernetes.io/instance": "root"})
	if _, err := apps.Update(ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The child's first write (its session, before the parents) lands;
	// every later write of the child fails: its pause, then the removal of
	// its session.
	var mu sync.Mutex
	childWrites, refuse := 0, true
	f.dyn.PrependReactor("patch", "applications", func(a clienttesting.Action) (bool, runtime.Object, error) {
		patch := a.(clienttesting.PatchAction)
		if patch.GetName() != "web" || strings.Contains(string(patch.GetPatch()), "reconciledAt") {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		if childWrites++; childWrites > 1 && refuse {
			return true, nil, apierrors.NewServiceUnavailable("the API server is going away")
		}
		return false, nil, nil
	})
	code, _, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "-y")
	if code == ExitOK || !strings.Contains(errOut, "the pause could not be undone") || !strings.Contains(errOut, "kubectl gitops restore web") {
		t.Fatalf("exit %d, %s", code, errOut)
	}
	parent, err := apps.Get(ctx, "root", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if by := parent.GetAnnotations()[breakglass.PausedByAnnotation]; by != "" || !argocd.AppOf(parent).SyncsAutomatically() {
		t.Errorf("the parent is still paused (%q)", by)
	}
	s, err := breakglass.SessionOf(f.app())
	if err != nil {
		t.Fatalf("the removal of the session failed, yet web carries none: %v", err)
	}
	entries, err := f.audit.Entries(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	records := audit.Records(entries)
	if !slices.ContainsFunc(records, func(r *audit.Record) bool {
		return r.Event == audit.EventPaused && r.Application != nil && r.Application.Name == "root" && r.Outcome.Status == audit.StatusSucceeded
	}) {
		t.Fatal("the parent was never paused: the abort did not take the path with parents")
	}
	_, sessions := audit.Legal(records)
	if holder := sessions.Holder(audit.AppRef{Namespace: "argocd", Name: "web"}); holder != s.ID {
		t.Fatalf("web carries session %s, the log holds it for %q", s.ID, holder)
	}

	mu.Lock()
	refuse = false
	mu.Unlock()
	if code, out, errOut := runPlugin(t, "restore", "web", "-y"); code != ExitOK {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := breakglass.SessionOf(f.app()); err == nil {
		t.Error("restore left the session on web")
	}
	if !argocd.AppOf(f.app()).SyncsAutomatically() {
		t.Error("restore left web's automated sync off")
	}
}
