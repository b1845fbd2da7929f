//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// ignoreDifferencesOf is the Application's spec.ignoreDifferences, nil when unset.
func ignoreDifferencesOf(t *testing.T, name string) []any {
	t.Helper()
	app, err := appsClient(t).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	entries, _, _ := unstructured.NestedSlice(app.Object, "spec", "ignoreDifferences")
	return entries
}

// TestBreakglassKilledAnywhereIsRecoverable: SIGKILL of a break-glass
// (a closed laptop, a dropped VPN) at 0.05 s steps across its whole run.
// Whatever state each kill leaves, the tool ends it: status resolves a
// run that was interrupted mid-patch from the live target, restore (or,
// when Git has not caught up, restore --force) closes the session, the
// sync policy comes back exactly, and every record of it is one the
// session state machine accepts, and the hold (--hold app) is gone. A kill after the pending mark used to
// leave a session that not even restore --force could end.
func TestBreakglassKilledAnywhereIsRecoverable(t *testing.T) {
	core(t)
	created := deployApp(t, "bg-kill")
	want, _, _ := unstructured.NestedMap(created.Object, "spec", "syncPolicy")
	oncall := newUser(t, env.Oncall.Name)
	breakglassAt := func(i int) *exec.Cmd {
		cmd := exec.Command(filepath.Join(binDir, "kubectl-gitops"), "breakglass", "bg-kill", "deployment/web",
			"--replicas", fmt.Sprint(3+i%5), "--reason", fmt.Sprintf("killed run %d", i), "--hold", "app", "-y")
		cmd.Env = oncall.env
		return cmd
	}
	recover := func(i int) {
		t.Helper()
		oncall.run("kubectl", "gitops", "status", "bg-kill") // resolves an interrupted run
		if _, open := appAnnotations(t, "bg-kill")[breakglass.SessionAnnotation]; open {
			if _, _, code := oncall.run("kubectl", "gitops", "restore", "bg-kill", "-y"); code != 0 {
				if out, errOut, code := oncall.run("kubectl", "gitops", "restore", "bg-kill", "--force", "--reason", "after a killed break-glass", "-y"); code != 0 {
					t.Fatalf("run %d: the session left by the kill could not be ended: exit %d\n%s%s", i, code, out, errOut)
				}
			}
		}
		if a := appAnnotations(t, "bg-kill"); a[breakglass.SessionAnnotation] != "" {
			t.Fatalf("run %d: session still open after restore", i)
		}
		if got := syncPolicyOf(t, "bg-kill"); !reflect.DeepEqual(got, want) {
			t.Fatalf("run %d: sync policy %v after the restore, want %v", i, got, want)
		}
		// The hold goes with the session, whatever state the kill left.
		if got := ignoreDifferencesOf(t, "bg-kill"); got != nil {
			t.Fatalf("run %d: ignoreDifferences %v left after the restore", i, got)
		}
	}

	// How long a whole run takes here, to kill across it.
	start := time.Now()
	if out, errOut, code := oncall.run(breakglassAt(0).Path, breakglassAt(0).Args[1:]...); code != 0 {
		t.Fatalf("a whole break-glass: exit %d\n%s%s", code, out, errOut)
	}
	whole := time.Since(start)
	recover(0)
	kills, resolved := 0, 0
	for i, at := 1, 50*time.Millisecond; at <= whole+50*time.Millisecond; i, at = i+1, at+50*time.Millisecond {
		cmd := breakglassAt(i)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(at)
		if cmd.Process.Signal(syscall.SIGKILL) == nil {
			kills++
		}
		_ = cmd.Wait()
		before := len(allRecords(t))
		recover(i)
		for _, r := range allRecords(t)[before:] {
			if r.Resolves != "" {
				resolved++
			}
		}
	}
	t.Logf("a whole run took %s; %d kills at 0.05 s steps, %d interrupted runs resolved from the live target", whole.Round(time.Millisecond), kills, resolved)

	// Every record of every session on bg-kill is one the state machine
	// accepts: nothing a kill left is a break.
	sessions := map[string]bool{}
	var mine []*audit.Record
	for _, r := range allRecords(t) {
		if r.Application != nil && r.Application.Name == "bg-kill" {
			sessions[r.Session] = true
		}
	}
	for _, r := range allRecords(t) {
		if sessions[r.Session] {
			mine = append(mine, r)
		}
	}
	ss := audit.NewSessions()
	for _, r := range mine {
		if ok, b := ss.Add(r); !ok && b != nil {
			t.Errorf("record %d (%s by %s): %s", r.Seq, r.Event, r.Actor.Username, b.Detail)
		}
	}
	if kills == 0 {
		t.Errorf("no run was killed: each ended within 50 ms")
	}
}

// appAnnotations are the annotations of Application name.
func appAnnotations(t *testing.T, name string) map[string]string {
	t.Helper()
	app, err := appsClient(t).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return app.GetAnnotations()
}
