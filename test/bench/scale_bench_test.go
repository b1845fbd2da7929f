package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/drift"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// The scale stage: 1,000 Applications besides "web", 50 of them with an
// open session, each compared once by Argo CD's controller. Behind them is
// the audit log such a fleet has: 300 closed sessions on those 50
// Applications (planned, paused, patched, restored), then the open
// sessions' records (planned, paused, patched), appended through the real
// store as a cluster admin, so that status, drift and the controller read
// and trust sessions as they do in a real install. It takes minutes, so
// the first scale benchmark of a run builds it and the others share it;
// TestMain stops it.
const scaleApps, scaleSessions, scaleClosed = 1000, 50, 300

var (
	scaleOnce  sync.Once
	scaled     *stage
	scaleError error
)

// scaleStage is the scale stage, built on first use.
func scaleStage(b *testing.B) *stage {
	b.Helper()
	scaleOnce.Do(func() {
		start := time.Now()
		if scaled, scaleError = startStage(env.Options{}); scaleError == nil {
			scaleError = scaled.populate(b.Logf)
		}
		b.Logf("scale stage built in %s", time.Since(start).Round(time.Second))
	})
	if scaleError != nil {
		b.Fatal(scaleError)
	}
	return scaled
}

func stopScaleStage() {
	if scaled != nil {
		scaled.stop()
	}
}

// populate creates the scale stage's Applications and waits, at most 15
// minutes, until Argo CD's controller has compared every one.
func (s *stage) populate(logf func(string, ...any)) error {
	ctx := context.Background()
	head, err := s.e.Git.Head()
	if err != nil {
		return err
	}
	if err := s.seedLog(ctx, head); err != nil {
		return err
	}
	errs := make([]error, scaleApps)
	argocd.Parallel(scaleApps, func(i int) {
		app := s.e.Application(fmt.Sprintf("scale-%04d", i), env.FixtureApp, env.DemoNamespace, nil)
		if i < scaleSessions {
			// As the tool writes it: a struct, its id first.
			saw, now := true, time.Now().UTC()
			session, _ := json.Marshal(breakglass.Session{
				ID: scaleSessionID("open", i), State: breakglass.StatePatched, OpenedBy: env.Admin.Name, OpenedAt: now,
				Reason: "bench", SavedSyncPolicy: json.RawMessage("null"), GitRevision: head,
				Patches: []breakglass.SessionPatch{{Target: audit.Target{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: env.DemoNamespace, Name: "web"},
					Type: "strategic", Fields: []breakglass.PatchedField{}, At: now, ArgoSawPatch: &saw}},
			})
			app.SetAnnotations(map[string]string{breakglass.SessionAnnotation: string(session)})
		}
		_, errs[i] = s.apps.Create(ctx, app, metav1.CreateOptions{})
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	deadline := time.Now().Add(15 * time.Minute)
	for {
		list, err := s.apps.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		compared := 0
		for _, a := range list.Items {
			if st, _, _ := unstructured.NestedString(a.Object, "status", "sync", "status"); st != "" {
				compared++
			}
		}
		if compared >= scaleApps || time.Now().After(deadline) {
			logf("%d of %d Applications compared by the controller", compared, len(list.Items))
			return nil
		}
		time.Sleep(2 * time.Second)
	}
}

func scaleSessionID(kind string, i int) string {
	return fmt.Sprintf("20261203-000000-%s-%04d", kind, i)
}

// seedLog appends the scale stage's audit records: scaleClosed closed
// sessions spread over the first scaleSessions Applications, then one open
// session on each of them, as the annotations populate writes name.
func (s *stage) seedLog(ctx context.Context, head string) error {
	store := audit.NewConfigMapStore(s.kube, s.e.ArgoNamespace)
	actor := audit.Actor{Username: env.Admin.Name, Groups: env.Admin.Groups}
	target := &audit.Target{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: env.DemoNamespace, Name: "web"}
	ok := audit.Outcome{Status: audit.StatusSucceeded}
	session := func(id string, app int, closed bool) []*audit.Record {
		ref := &audit.AppRef{Namespace: s.e.ArgoNamespace, Name: fmt.Sprintf("scale-%04d", app)}
		recs := []*audit.Record{
			{Event: audit.EventPlanned, Session: id, Actor: actor, Application: ref, Target: target, Reason: "bench",
				SyncPolicy: &audit.SyncPolicy{Before: nil}, Git: &audit.Git{Revision: head}, Outcome: audit.Outcome{Status: audit.StatusStarted}},
			{Event: audit.EventPaused, Session: id, Actor: actor, Application: ref, SyncPolicy: &audit.SyncPolicy{Before: nil}, Outcome: ok},
			{Event: audit.EventPatched, Session: id, Actor: actor, Application: ref, Target: target, Patch: &audit.Patch{Type: "strategic", Body: `{}`}, Outcome: ok},
		}
		if closed {
			recs = append(recs, &audit.Record{Event: audit.EventRestored, Session: id, Actor: actor, Application: ref, Reason: "Git has the fix", Outcome: ok})
		}
		return recs
	}
	var recs []*audit.Record
	for i := 0; i < scaleClosed; i++ {
		recs = append(recs, session(scaleSessionID("closed", i), i%scaleSessions, true)...)
	}
	for i := 0; i < scaleSessions; i++ {
		recs = append(recs, session(scaleSessionID("open", i), i, false)...)
	}
	for _, r := range recs {
		if err := store.Append(ctx, r); err != nil {
			return fmt.Errorf("seeding the audit log: %w", err)
		}
	}
	return nil
}

// BenchmarkStatusAtScale times `kubectl gitops status -A` on the scale
// stage against `kubectl get applications -A -o json` on the same server,
// median of 3 each (goal: at most the listing's time).
func BenchmarkStatusAtScale(b *testing.B) {
	s := scaleStage(b)
	kubeconfig := s.e.Kubeconfig(env.Admin.Name)
	status := func() {
		out, err := exec.Command(s.plugin, "--kubeconfig", kubeconfig, "status", "-A", "-o", "json").Output()
		var sts []any
		if err != nil || json.Unmarshal(out, &sts) != nil || len(sts) != scaleSessions {
			b.Fatalf("status -A: %v, %d sessions (want %d)", err, len(sts), scaleSessions)
		}
	}
	list := func() {
		cmd := exec.Command("kubectl", "--kubeconfig", kubeconfig, "get", "applications", "-A", "-o", "json")
		cmd.Stdout, cmd.Stderr = nil, os.Stderr
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
	var statusTimes, listTimes []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for run := 0; run < 3; run++ {
			statusTimes = append(statusTimes, timed(status))
			listTimes = append(listTimes, timed(list))
		}
	}
	b.StopTimer()
	st, l := median(statusTimes), median(listTimes)
	b.ReportMetric(st.Seconds(), "status-A-s")
	b.ReportMetric(l.Seconds(), "kubectl-get-s")
	report("status -A, 1000 Applications, 50 open and 300 closed sessions", seconds(st), "", false)
	report("status -A: ratio to kubectl get applications -A -o json", fmt.Sprintf("%.2f", st.Seconds()/l.Seconds()), "<= 1.0", st <= l)
}

// BenchmarkDriftAtScale times `kubectl gitops drift -A -o json` on the
// scale stage, median of 3: with the Argo CD API configured as the
// end-to-end tests configure it (goal: at most 10 s), and without it
// (resource level only).
func BenchmarkDriftAtScale(b *testing.B) {
	s := scaleStage(b)
	token, err := s.e.ArgoToken(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	home := b.TempDir() // no argocd login to find
	var environ []string
	for _, v := range os.Environ() {
		if !strings.HasPrefix(v, "ARGOCD_") && !strings.HasPrefix(v, "HOME=") {
			environ = append(environ, v)
		}
	}
	environ = append(environ, "HOME="+home, "KUBECONFIG="+s.e.Kubeconfig(env.Admin.Name))
	// driftAll runs it and returns how many Applications were compared field
	// by field: one whose managed resources the API did not give is
	// compared by resource, and quicker.
	driftAll := func(argo ...string) (fieldLevel int) {
		var stderr strings.Builder
		cmd := exec.Command(s.plugin, "drift", "-A", "-o", "json")
		cmd.Env, cmd.Stderr = slices.Concat(environ, argo), &stderr
		out, err := cmd.Output()
		var reports []drift.Report
		if err != nil || json.Unmarshal(out, &reports) != nil || len(reports) <= scaleApps {
			b.Fatalf("drift -A: %v, %d reports (want %d): %.2000s", err, len(reports), scaleApps+1, stderr.String())
		}
		for _, r := range reports {
			if r.Mode == "field" {
				fieldLevel++
			}
		}
		return fieldLevel
	}
	argo := []string{"ARGOCD_SERVER=" + s.e.ArgoServerAddr, "ARGOCD_AUTH_TOKEN=" + token, "ARGOCD_OPTS=--plaintext"}
	var withAPI, resourceLevel []time.Duration
	fieldLevel := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for run := 0; run < 3; run++ {
			withAPI = append(withAPI, timed(func() { fieldLevel = driftAll(argo...) }))
			resourceLevel = append(resourceLevel, timed(func() { driftAll() }))
		}
	}
	b.StopTimer()
	w, r := median(withAPI), median(resourceLevel)
	b.ReportMetric(w.Seconds(), "drift-A-s(goal<=10)")
	b.ReportMetric(r.Seconds(), "drift-A-resource-level-s")
	report("drift -A, 1000 Applications, with the Argo CD API", fmt.Sprintf("%.2f s (%d field level, last run)", w.Seconds(), fieldLevel), "≤ 10 s", w <= 10*time.Second)
	report("drift -A, 1000 Applications, without it (resource level)", seconds(r), "", false)
}
