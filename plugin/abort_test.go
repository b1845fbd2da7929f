package plugin

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

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
