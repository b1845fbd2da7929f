package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/controller"
)

// TestControllerDeploymentRunsACommandTheBinaryTakes: the shipped
// Deployment's arguments are a command line of this binary.
func TestControllerDeploymentRunsACommandTheBinaryTakes(t *testing.T) {
	data, err := os.ReadFile("../deploy/controller/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if len(c.Command) != 1 || c.Command[0] != "/kubectl-gitops" {
		t.Fatalf("command %v: the image's binary is /kubectl-gitops", c.Command)
	}
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = strings.ReplaceAll(a, "$(POD_NAME)", "pod-0") // as the kubelet expands it
	}
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	root := NewCmdRoot(testFactory(t, streams))
	cmd, rest, err := root.Find(args)
	if err != nil || cmd.Name() != "controller" {
		t.Fatalf("%v: finds %v, %v", args, cmd, err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("the controller does not take %v: %v", rest, err)
	}
	if err := cmd.Args(cmd, cmd.Flags().Args()); err != nil {
		t.Fatal(err)
	}
	if p := d.Spec.Template.Spec.Containers[0].ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v", p)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("the root filesystem is not read-only: %+v", sc)
	}
	if ps := d.Spec.Template.Spec.SecurityContext; ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		t.Errorf("the pod may run as root: %+v", ps)
	}
}

// countingLog counts the audit log reads of the store it wraps.
type countingLog struct {
	audit.Store
	reads atomic.Int64
}

func (c *countingLog) Entries(ctx context.Context, filter audit.Filter) ([]audit.Entry, error) {
	c.reads.Add(1)
	return c.Store.Entries(ctx, filter)
}

// TestControllerOnFakes runs the controller over the fake cluster: while
// nothing but Argo CD's periodic reconcile stamp changes (and resyncs
// run) it reads nothing; once Git has caught up it restores the
// auto-restore session it evaluated, as itself, recorded as restored.
func TestControllerOnFakes(t *testing.T) {
	f := newFakeCluster(t)
	if code, out, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "--auto-restore", "-y"); code != ExitOK {
		t.Fatalf("break-glass: %d %s %s", code, out, errOut)
	}
	log, metrics := runController(t, time.Hour)
	ctx := context.Background()
	// Its first look refreshes the Application (Git is behind); the fake
	// Argo CD answers. Wait until its reads settle.
	settled := func() int64 {
		for last := int64(-1); ; time.Sleep(time.Second) {
			if n := log.reads.Load(); n == last {
				return n
			} else {
				last = n
			}
		}
	}
	before := settled()
	if before == 0 {
		t.Fatal("the controller never looked at the session")
	}
	apps := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd")
	for i := 0; i < 5; i++ {
		stamp := fmt.Sprintf(`{"status":{"reconciledAt":"2026-12-03T10:0%d:00Z"}}`, i)
		if _, err := apps.Patch(ctx, "web", types.MergePatchType, []byte(stamp), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if after := settled(); after != before {
		t.Errorf("the controller read the audit log %d times while only Argo CD's reconcile stamp changed", after-before)
	}

	// Git catches up; a webhook's refresh has Argo CD see it.
	gitCatchesUp(t, f)
	if _, err := apps.Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+argocd.RefreshAnnotation+`":"normal"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, open := f.app().GetAnnotations()[breakglass.SessionAnnotation]; open; _, open = f.app().GetAnnotations()[breakglass.SessionAnnotation] {
		if time.Now().After(deadline) {
			t.Fatal("the controller did not restore the session once Git caught up")
		}
		time.Sleep(100 * time.Millisecond)
	}
	last := records(t, f)
	if r := last[len(last)-1]; r.Event != audit.EventRestored || r.Outcome.Status != audit.StatusSucceeded {
		t.Errorf("last record %s/%s, want a succeeded breakglass.restored", r.Event, r.Outcome.Status)
	}
	// What it did shows on /metrics, its work queue's adds too.
	families := scrape(t, metrics)
	if n := families["kubectl_gitops_auto_restores_total"].GetMetric(); len(n) != 1 || n[0].GetCounter().GetValue() != 1 {
		t.Errorf("kubectl_gitops_auto_restores_total %v, want 1", n)
	}
	adds := 0.0
	for _, m := range families["workqueue_adds_total"].GetMetric() {
		if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetName() == "name" && m.GetLabel()[0].GetValue() == "applications" {
			adds = m.GetCounter().GetValue()
		}
	}
	if adds == 0 {
		t.Errorf("no workqueue_adds_total{name=\"applications\"} after a restore")
	}
}

// runController runs the controller over the fake cluster (a resync every
// second, refreshes hourly, reminders every remind) until the test ends,
// once it leads; it returns the audit log it reads, counting the reads,
// and its metrics.
func runController(t *testing.T, remind time.Duration) (*countingLog, *controller.Metrics) {
	t.Helper()
	return runControllerLogging(t, remind, nil)
}

// runControllerLogging is runController with the controller's log lines
// sent to logf.
func runControllerLogging(t *testing.T, remind time.Duration, logf func(string, ...any)) (*countingLog, *controller.Metrics) {
	t.Helper()
	engine, err := testFactory(t, genericiooptions.IOStreams{}).newEngine(&engineFlags{AppNamespace: "argocd"})
	if err != nil {
		t.Fatal(err)
	}
	log := &countingLog{Store: engine.Audit}
	engine.Audit = log
	ctx, cancel := context.WithCancel(context.Background())
	c := &controller.Controller{Engine: engine, LeaseNamespace: "argocd", LeaseName: "kubectl-gitops-controller", Identity: "test",
		LeaseDuration: 2 * time.Second, Resync: time.Second, RefreshEvery: time.Hour, RemindEvery: remind, Metrics: controller.NewMetrics(), Log: logf,
		CloseGrace: 2 * time.Second}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-c.Ready():
	case err := <-done:
		t.Fatalf("the controller stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the controller did not lead within 10s")
	}
	return log, c.Metrics
}

// TestControllerSaysWhenItCannotTell: a session that holds its fields
// (--hold app) is judged only field by field through the Argo CD API; a
// controller without it could never restore it, and says so once instead
// of waiting in silence.
func TestControllerSaysWhenItCannotTell(t *testing.T) {
	f := newFakeCluster(t)
	if code, out, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "--hold", "app", "--auto-restore", "-y"); code != ExitOK {
		t.Fatalf("break-glass: %d %s %s", code, out, errOut)
	}
	gitCatchesUp(t, f)
	var mu sync.Mutex
	var lines []string
	runControllerLogging(t, time.Hour, func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprintf(format, args...))
	})
	said := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, l := range lines {
			if strings.Contains(l, "will not restore by itself") && strings.Contains(l, "ARGOCD_SERVER") {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); said() == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the controller never said it cannot tell; its log:\n%s", strings.Join(lines, "\n"))
		}
	}
	time.Sleep(3 * time.Second) // three resyncs
	if n := said(); n != 1 {
		t.Errorf("said %d times, want once", n)
	}
	if _, open := f.app().GetAnnotations()[breakglass.SessionAnnotation]; !open {
		t.Error("the session was restored without a field-level check")
	}
}

// TestControllerNoticesExpiryBehindAnEditedAnnotation: on-call pushed the
// annotation's expiry out by an hour, which the log does not match; the
// expiry the controller waits for is the log's all the same, so the
// expired notice comes when it is due, with nothing else changing.
func TestControllerNoticesExpiryBehindAnEditedAnnotation(t *testing.T) {
	f := newFakeCluster(t)
	if code, out, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "--expires", "3s", "-y"); code != ExitOK {
		t.Fatalf("break-glass: %d %s %s", code, out, errOut)
	}
	session, err := breakglass.ParseSession(f.app().GetAnnotations()[breakglass.SessionAnnotation])
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	session.Expires = &later
	edited, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{breakglass.SessionAnnotation: string(mustMarshal(t, session))}}})
	ctx := context.Background()
	if _, err := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd").Patch(ctx, "web", types.MergePatchType, edited, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	runController(t, time.Hour)
	awaitLastRecord(t, f, audit.EventExpired)
}

// awaitLastRecord waits, 15s at most, until the audit log's last record
// is of event.
func awaitLastRecord(t *testing.T, f *fakeCluster, event audit.Event) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if lastRecord(t, f).Event == event {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s record within 15s", event)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func lastRecord(t *testing.T, f *fakeCluster) *audit.Record {
	t.Helper()
	all := records(t, f)
	return all[len(all)-1]
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestControllerRemindsEveryRemindEvery: an expired session whose Git has
// not caught up is recorded once and told again every --remind-every, as
// a Warning Event each time, with nothing else changing.
func TestControllerRemindsEveryRemindEvery(t *testing.T) {
	f := newFakeCluster(t)
	if code, out, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "--expires", "1s", "-y"); code != ExitOK {
		t.Fatalf("break-glass: %d %s %s", code, out, errOut)
	}
	time.Sleep(time.Second)
	runController(t, 2*time.Second)
	expiredEvents := func() int {
		list, err := f.kube.CoreV1().Events("argocd").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range list.Items {
			if ev.Reason == breakglass.EventExpiredReason && ev.Type == "Warning" {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(15 * time.Second)
	for expiredEvents() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d Expired events within 15s, want the notice and two reminders 2s apart", expiredEvents())
		}
		time.Sleep(100 * time.Millisecond)
	}
	notices := 0
	for _, r := range records(t, f) {
		if r.Event == audit.EventExpired {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("%d breakglass.expired records, want one: reminders are Events and comments", notices)
	}
	if enabled, _, _ := unstructured.NestedBool(f.app().Object, "spec", "syncPolicy", "automated", "enabled"); enabled {
		t.Error("the expiry re-enabled sync")
	}
}

// TestControllerNoticesRetargetingAndResolvesInterruptedRuns: a session
// whose Application was repointed gets one breakglass.retargeted notice
// and a Warning Event and is not auto-restored though Git "caught up"
// there; a run of it interrupted after marking its patch is resolved from
// the live target with no person.
func TestControllerNoticesRetargetingAndResolvesInterruptedRuns(t *testing.T) {
	f := newFakeCluster(t)
	if code, out, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "--auto-restore", "-y"); code != ExitOK {
		t.Fatalf("break-glass: %d %s %s", code, out, errOut)
	}
	interruptedJoin(endedProcess(t), true)(t, f)
	gitCatchesUp(t, f)
	repointed(t, f)
	runController(t, time.Hour)
	count := func(event audit.Event) (n int) {
		for _, r := range records(t, f) {
			if r.Event == event {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(15 * time.Second)
	for count(audit.EventRetargeted) == 0 || count(audit.EventPatched) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("within 15s: %d retargeted notices, %d patched records (want 1, 2)", count(audit.EventRetargeted), count(audit.EventPatched))
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // a few resyncs
	if n := count(audit.EventRetargeted); n != 1 {
		t.Errorf("%d retargeted notices, want 1", n)
	}
	if s := sessionOn(t, f); s == nil {
		t.Fatal("the controller restored a repointed session")
	}
	list, err := f.kube.CoreV1().Events("argocd").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	warned := false
	for _, ev := range list.Items {
		warned = warned || ev.Type == "Warning" && ev.Reason == breakglass.EventRetargeted
	}
	if !warned {
		t.Error("no Warning Event Retargeted")
	}
}

// TestControllerActsOnTheLogsSessionBehindAnEditedAnnotation (issue 32):
// an annotation edited behind an auto-restore session (pausing, a later
// expiry, auto-restore turned off, a parent the log never paused) held
// the auto-restore back for good. The controller names it once with a
// Warning Event and restores the log's session once Git has caught up.
func TestControllerActsOnTheLogsSessionBehindAnEditedAnnotation(t *testing.T) {
	f := newFakeCluster(t)
	if code, out, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "--auto-restore", "-y"); code != ExitOK {
		t.Fatalf("break-glass: %d %s %s", code, out, errOut)
	}
	editedBehind(t, f)
	runController(t, time.Hour)
	gitCatchesUp(t, f)
	if _, err := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd").Patch(context.Background(), "web", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+argocd.RefreshAnnotation+`":"normal"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The annotation goes before the outcome record is written: wait for
	// both, or the restore's started record is read as its last word.
	deadline := time.Now().Add(15 * time.Second)
	for sessionOn(t, f) != nil || lastRecord(t, f).Outcome.Status == audit.StatusStarted {
		if time.Now().After(deadline) {
			t.Fatal("the controller did not restore the session once Git caught up")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := lastRecord(t, f); r.Event != audit.EventRestored || r.Outcome.Status != audit.StatusSucceeded || !strings.Contains(r.Outcome.Error, "autoRestore (annotation false, audit log true)") {
		t.Errorf("last record %s/%s %q, want a succeeded breakglass.restored naming the disagreement", r.Event, r.Outcome.Status, r.Outcome.Error)
	}
	list, err := f.kube.CoreV1().Events("argocd").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	warned := 0
	for _, ev := range list.Items {
		if ev.Type == "Warning" && ev.Reason == breakglass.EventMismatch && strings.Contains(ev.Message, `state (annotation "pausing", audit log patched)`) {
			warned++
		}
	}
	if warned != 1 {
		t.Errorf("%d Warning Events SessionMismatch, want one", warned)
	}
}

// TestControllerNoticesSyncTurnedBackOnBehindAnAnnotationThatSaysPausing:
// "pausing" in the annotation hid sync turned back on behind the session;
// the state the controller reads is the log's.
func TestControllerNoticesSyncTurnedBackOnBehindAnAnnotationThatSaysPausing(t *testing.T) {
	f := newFakeCluster(t)
	if code, out, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "-y"); code != ExitOK {
		t.Fatalf("break-glass: %d %s %s", code, out, errOut)
	}
	statePausing(t, f)
	syncTurnedBackOn(t, f)
	runController(t, time.Hour)
	awaitLastRecord(t, f, audit.EventReenabled)
}

// TestControllerNoticesARevertedFix: a fix put back to Git's value by a
// manual Sync is recorded once as breakglass.reverted, naming the writer,
// with a Warning Event Reverted.
func TestControllerNoticesARevertedFix(t *testing.T) {
	f := newFakeCluster(t)
	if code, out, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "-y"); code != ExitOK {
		t.Fatalf("break-glass: %d %s %s", code, out, errOut)
	}
	runController(t, time.Hour)
	revertedBy("argocd-controller")(t, f)
	// Argo CD writes the Application's status after a sync: that change
	// is what brings the session back to the controller.
	if _, err := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd").Patch(context.Background(), "web", types.MergePatchType,
		[]byte(`{"status":{"operationState":{"phase":"Succeeded"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var notice *audit.Record
	for deadline := time.Now().Add(15 * time.Second); notice == nil; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no breakglass.reverted record within 15s")
		}
		for _, r := range records(t, f) {
			if r.Event == audit.EventReverted {
				notice = r
			}
		}
	}
	if !strings.Contains(notice.Reason, "/spec/replicas, by argocd-controller (argocd)") {
		t.Errorf("the notice does not name the writer: %q", notice.Reason)
	}
	list, err := f.kube.CoreV1().Events("argocd").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	warned := false
	for _, ev := range list.Items {
		warned = warned || ev.Type == "Warning" && ev.Reason == breakglass.EventReverted
	}
	if !warned {
		t.Error("no Warning Event Reverted")
	}
}

// TestControllerNoticesARevertFromTheLiveObject: the controller watches
// the objects open sessions patched (an informer per kind in use), so a
// revert is recorded even when nothing about the Application changes (a
// kubectl apply of Git's manifest, an operator). Before, the controller
// looked only when the Application did.
func TestControllerNoticesARevertFromTheLiveObject(t *testing.T) {
	f := newFakeCluster(t)
	if code, out, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "-y"); code != ExitOK {
		t.Fatalf("break-glass: %d %s %s", code, out, errOut)
	}
	runController(t, time.Hour)
	reverted := func() bool {
		for _, r := range records(t, f) {
			if r.Event == audit.EventReverted {
				return true
			}
		}
		return false
	}
	// Let the controller evaluate the session and start watching first.
	time.Sleep(2 * time.Second)
	if reverted() {
		t.Fatal("a revert recorded before any")
	}
	// As the API server does, the spec change bumps the generation.
	d := liveDeployment(t, f)
	_ = unstructured.SetNestedField(d.Object, int64(2), "spec", "replicas")
	d.SetGeneration(d.GetGeneration() + 1)
	now := metav1.Now()
	d.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1", Time: &now,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}}})
	if _, err := f.dyn.Resource(deploymentsGVR).Namespace("demo").Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); !reverted(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no breakglass.reverted record within 15s of the live object changing")
		}
	}
}

// TestControllerNoticesAnOrphanedPause: an Application paused by hand with
// a paused-by mark that no open session accounts for is recorded once as
// breakglass.orphaned, with a Warning Event; the controller used to look
// only at Applications with a session.
func TestControllerNoticesAnOrphanedPause(t *testing.T) {
	f := newFakeCluster(t)
	if code, out, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "-y"); code != ExitOK {
		t.Fatalf("break-glass: %d %s %s", code, out, errOut)
	}
	silentPause(t, f)
	runController(t, time.Hour)
	count := func() (n int) {
		for _, r := range records(t, f) {
			if r.Event == audit.EventOrphaned && r.Application != nil && r.Application.Name == "other" {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(15 * time.Second); count() == 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no breakglass.orphaned record within 15s")
		}
	}
	time.Sleep(2 * time.Second) // a few resyncs
	if n := count(); n != 1 {
		t.Errorf("%d orphaned notices, want 1", n)
	}
	assertWarned(t, f, breakglass.EventOrphanedReason, "other")
}

// assertWarned checks that f has a Warning Event of reason on Application
// name.
func assertWarned(t *testing.T, f *fakeCluster, reason, name string) {
	t.Helper()
	list, err := f.kube.CoreV1().Events("argocd").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range list.Items {
		if ev.Type == "Warning" && ev.Reason == reason && ev.InvolvedObject.Name == name {
			return
		}
	}
	t.Errorf("no Warning Event %s on application %s", reason, name)
}

// scrape is metrics' /metrics page, parsed.
func scrape(t *testing.T, metrics *controller.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	metrics.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// TestControllerNoticesAnUnaccountedSession: a session annotation written
// by hand (the admission policy lets one appear with a pause, since CEL
// cannot read the log) holds the Application for a session the log never
// opened: recorded once per session id as breakglass.orphaned, with a
// Warning Event OrphanedSession, and again once it comes back after going.
// So is one that is no session at all; but not an open session whose
// annotation was mangled past its id (the log has it). Before, only status
// named any of them, when someone ran it.
func TestControllerNoticesAnUnaccountedSession(t *testing.T) {
	f := newFakeCluster(t)
	if code, out, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "-y"); code != ExitOK {
		t.Fatalf("break-glass: %d %s %s", code, out, errOut)
	}
	apps := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd")
	annotate := func(name, value string) {
		t.Helper()
		app, err := apps.Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			app = f.app().DeepCopy()
			app.SetName(name)
			app.SetResourceVersion("")
			app.SetAnnotations(nil)
			_ = unstructured.SetNestedField(app.Object, false, "spec", "syncPolicy", "automated", "enabled")
			app, err = apps.Create(context.Background(), app, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		annotations := app.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		if value == "" {
			delete(annotations, breakglass.SessionAnnotation)
		} else {
			annotations[breakglass.SessionAnnotation] = value
		}
		app.SetAnnotations(annotations)
		if _, err := apps.Update(context.Background(), app, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ghost := `{"id":"20261207-030000-ghost\nforged log line ` + strings.Repeat("x", 4000) + `","openedBy":"mallory","state":"patched"}`
	annotate("ghost", ghost)
	annotate("mangled", `{"id":"20261207-030000-mangled",oops`)
	// The real session's annotation, mangled past its id.
	real := sessionOn(t, f).ID
	annotate("web", `{"id":"`+real+`",oops`)
	_, metrics := runController(t, time.Hour)
	orphaned := func(app string) (out []*audit.Record) {
		for _, r := range records(t, f) {
			if r.Event == audit.EventOrphaned && r.Application != nil && r.Application.Name == app {
				out = append(out, r)
			}
		}
		return out
	}
	waitOrphans := func(app string, n int) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); len(orphaned(app)) < n; time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d breakglass.orphaned records of %s within 15s, want %d", len(orphaned(app)), app, n)
			}
		}
	}
	waitOrphans("ghost", 1)
	waitOrphans("mangled", 1)
	// Rewriting the rest of the value (the policy allows it while the id
	// stays) writes no further record.
	annotate("ghost", `{"id":"20261207-030000-ghost\nforged log line `+strings.Repeat("x", 4000)+`","openedBy":"mallory","state":"paused"}`)
	time.Sleep(2 * time.Second) // a few resyncs
	got := orphaned("ghost")
	if len(got) != 1 || got[0].Session != "" || !strings.Contains(got[0].Reason, "20261207-030000-ghost") || !strings.Contains(got[0].Reason, "no verified audit record opens") ||
		!strings.Contains(got[0].Reason, "automated sync is off") || strings.Contains(got[0].Reason, "\n") || len(got[0].Reason) > 1000 {
		t.Fatalf("orphaned records %+v, want one naming the annotation's session, quoted and clipped", got)
	}
	if got := orphaned("mangled"); len(got) != 1 || !strings.Contains(got[0].Reason, "is not a session") {
		t.Errorf("orphaned records of the mangled annotation %+v", got)
	}
	if got := orphaned("web"); len(got) != 0 {
		t.Errorf("an open session whose annotation was mangled past its id was recorded as no session's: %+v", got)
	}
	// Gone and back with the same id: recorded again.
	annotate("ghost", "")
	time.Sleep(1500 * time.Millisecond)
	annotate("ghost", ghost)
	waitOrphans("ghost", 2)

	assertWarned(t, f, breakglass.EventOrphanedSessionReason, "ghost")
	if n := scrape(t, metrics)["kubectl_gitops_orphaned_pauses_total"].GetMetric(); len(n) != 1 || n[0].GetCounter().GetValue() != 3 {
		t.Errorf("kubectl_gitops_orphaned_pauses_total %v, want 3", n)
	}
}

// TestControllerNamesASessionClosedThatTheLogNeverOpened (issue 49, items 1
// and 4): a session opened and closed by hand with kubectl (the policy
// lets both through: CEL cannot read the log) can pause, terminate a sync,
// add ignoreDifferences and a banner in a tenth of a second, and the
// session annotation alone may never reach the controller. The close's
// last-session mark stays: one naming a session the log never opened (or
// opened on another Application) is recorded as breakglass.orphaned with
// a Warning Event UnrecordedSession, once, naming what the Application
// carries now; a session the tool opened and closed is not.
func TestControllerNamesASessionClosedThatTheLogNeverOpened(t *testing.T) {
	f := newFakeCluster(t)
	if code, out, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "-y"); code != ExitOK {
		t.Fatalf("break-glass: %d %s %s", code, out, errOut)
	}
	real := sessionOn(t, f).ID
	if code, out, errOut := runPlugin(t, "restore", "web", "--force", "--reason", "done", "-y"); code != ExitOK {
		t.Fatalf("restore: %d %s %s", code, out, errOut)
	}
	apps := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd")
	closedBy := func(name, id string, leave func(*unstructured.Unstructured)) {
		t.Helper()
		app := f.app().DeepCopy()
		app.SetName(name)
		app.SetResourceVersion("")
		app.SetAnnotations(map[string]string{breakglass.LastSessionAnnotation: `{"id":"` + id + `","closed":"restored"}`})
		if leave != nil {
			leave(app)
		}
		if _, err := apps.Create(context.Background(), app, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	closedBy("by-hand", "20261207-030000-hand", func(app *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(app.Object, []any{map[string]any{"group": "apps", "kind": "Deployment", "name": "web", "jsonPointers": []any{"/spec/replicas"}}}, "spec", "ignoreDifferences")
		_ = unstructured.SetNestedStringSlice(app.Object, []string{"RespectIgnoreDifferences=true"}, "spec", "syncPolicy", "syncOptions")
		annotations := app.GetAnnotations()
		annotations[breakglass.NoticeContent] = "Git has the fix. Sync is safe."
		app.SetAnnotations(annotations)
	})
	closedBy("elsewhere", real, nil) // the real session's id, on an Application it never held
	// A second session on web, opened and closed by the tool; then the
	// first one's id, reused by hand, closes as that one.
	if code, out, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "4", "--reason", "again", "-y"); code != ExitOK {
		t.Fatalf("second break-glass: %d %s %s", code, out, errOut)
	}
	second := sessionOn(t, f).ID
	if code, out, errOut := runPlugin(t, "restore", "web", "--force", "--reason", "done", "-y"); code != ExitOK {
		t.Fatalf("second restore: %d %s %s", code, out, errOut)
	}
	web := f.app()
	annotations := web.GetAnnotations()
	annotations[breakglass.LastSessionAnnotation] = `{"id":"` + real + `","closed":"restored"}`
	web.SetAnnotations(annotations)
	if _, err := apps.Update(context.Background(), web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, _ = runController(t, time.Hour)
	orphaned := func(app string) (out []*audit.Record) {
		for _, r := range records(t, f) {
			if r.Event == audit.EventOrphaned && r.Application != nil && r.Application.Name == app {
				out = append(out, r)
			}
		}
		return out
	}
	for deadline := time.Now().Add(15 * time.Second); len(orphaned("by-hand")) == 0 || len(orphaned("elsewhere")) == 0 || len(orphaned("web")) == 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no breakglass.orphaned records of by-hand and elsewhere within 15s: %+v %+v", orphaned("by-hand"), orphaned("elsewhere"))
		}
	}
	time.Sleep(2 * time.Second) // a few resyncs: still one each
	got := orphaned("by-hand")
	if len(got) != 1 || got[0].Session != "" || !strings.Contains(got[0].Reason, "20261207-030000-hand") || !strings.Contains(got[0].Reason, "which the audit log never opened") ||
		!strings.Contains(got[0].Reason, "1 spec.ignoreDifferences entries, syncOptions RespectIgnoreDifferences=true, an Argo CD notice banner") {
		t.Errorf("orphaned records of a session opened and closed by hand: %+v", got)
	}
	if got := orphaned("elsewhere"); len(got) != 1 || !strings.Contains(got[0].Reason, "which the audit log opened on argocd/web, not here") ||
		!strings.Contains(got[0].Reason, "it carries none of what a session leaves") {
		t.Errorf("orphaned records of another Application's session: %+v", got)
	}
	if got := orphaned("web"); len(got) != 1 || !strings.Contains(got[0].Reason, "which the audit log closed here before session "+strconv.Quote(second)+": an old session's id reused by hand") {
		t.Errorf("orphaned records of web, whose mark names its first session again: %+v", got)
	}
	assertWarned(t, f, breakglass.EventUnrecordedSessionReason, "by-hand")
}

// TestControllerNamesAHandMadeCloseOfALoggedSession (issue 49, item 1): a
// session the log opened, closed on the Application with kubectl (the
// annotation gone, the mark, sync back on): no record closes it, and what
// the close put back is nobody's word. Named once the close has stood
// unrecorded for the grace a restore's own record takes, not before.
func TestControllerNamesAHandMadeCloseOfALoggedSession(t *testing.T) {
	f := newFakeCluster(t)
	if code, out, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "-y"); code != ExitOK {
		t.Fatalf("break-glass: %d %s %s", code, out, errOut)
	}
	id := sessionOn(t, f).ID
	web := f.app()
	annotations := web.GetAnnotations()
	delete(annotations, breakglass.SessionAnnotation)
	annotations[breakglass.LastSessionAnnotation] = `{"id":"` + id + `","closed":"restored"}`
	web.SetAnnotations(annotations)
	_ = unstructured.SetNestedField(web.Object, true, "spec", "syncPolicy", "automated", "enabled")
	if _, err := f.dyn.Resource(argocd.ApplicationGVR).Namespace("argocd").Update(context.Background(), web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	orphaned := func() (out []*audit.Record) {
		for _, r := range records(t, f) {
			if r.Event == audit.EventOrphaned && r.Application != nil && r.Application.Name == "web" {
				out = append(out, r)
			}
		}
		return out
	}
	runController(t, time.Hour)
	time.Sleep(time.Second)
	if got := orphaned(); len(got) != 0 {
		t.Fatalf("named within the grace a restore's record takes: %+v", got)
	}
	for deadline := time.Now().Add(15 * time.Second); len(orphaned()) == 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the unrecorded close of a logged session was not named within 15s")
		}
	}
	time.Sleep(2 * time.Second)
	if got := orphaned(); len(got) != 1 || !strings.Contains(got[0].Reason, "which the audit log still has open: it was closed without a record") ||
		!strings.Contains(got[0].Reason, "kubectl gitops audit log --app web --event breakglass.planned") {
		for _, r := range got {
			t.Errorf("orphaned record of web: %s", r.Reason)
		}
	}
	assertWarned(t, f, breakglass.EventUnrecordedSessionReason, "web")
}

// GIT_TOKEN is sent only to the hosts it is for: a GitHub Enterprise or
// self-managed GitLab token never to github.com or gitlab.com.
func TestControllerTokenHosts(t *testing.T) {
	for _, c := range []struct {
		github, gitlab string
		named          []string
		want           string
	}{
		{"", "", nil, "github.com gitlab.com"},
		{"https://api.github.com", "https://gitlab.com/api/v4", nil, "github.com gitlab.com"},
		{"https://ghe.example/api/v3", "", []string{"Git.Example:8443"}, "ghe.example git.example:8443 gitlab.com"},
		{"", "https://git.corp/api/v4", nil, "git.corp github.com"},
	} {
		t.Setenv(githubAPIEnv, c.github)
		t.Setenv(gitlabAPIEnv, c.gitlab)
		o := &ControllerOptions{gitHosts: c.named}
		if got := strings.Join(o.tokenHosts(), " "); got != c.want {
			t.Errorf("%+v: %s, want %s", c, got, c.want)
		}
	}
}

// TestControllerPutsTheBannerBack: a banner rewritten during a session
// ("Git has the fix. Sync is safe.", with a link to another host) is put
// back to the one the session's records make, within seconds, and named
// in a Warning Event.
func TestControllerPutsTheBannerBack(t *testing.T) {
	f := newFakeCluster(t)
	if code, out, errOut := runPlugin(t, "breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "-y"); code != ExitOK {
		t.Fatalf("break-glass: %d %s %s", code, out, errOut)
	}
	want := noticeOf(t, f)
	runController(t, time.Hour)
	bannerRewritten(t, f)
	deadline := time.Now().Add(10 * time.Second)
	for noticeOf(t, f) != want {
		if time.Now().After(deadline) {
			t.Fatalf("the banner is still\n%s\nwant\n%s", noticeOf(t, f), want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	assertWarned(t, f, breakglass.EventMismatch, "web")
}
