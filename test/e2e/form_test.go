//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// tmuxSession drives a real terminal: the command runs in a detached tmux
// session, keys are typed with send-keys and the screen is read with
// capture-pane.
type tmuxSession struct {
	t    *testing.T
	name string
	// socket is the session's own tmux server: sessions sharing one
	// raced its exit (a session killed as the last one ends the server,
	// and the next new-session met it going: "server exited unexpectedly").
	socket string
}

// tmuxServers numbers the tmux servers this process starts.
var tmuxServers atomic.Int64

// tmux runs a tmux command on the session's own server.
func (s *tmuxSession) tmux(args ...string) *exec.Cmd {
	return exec.Command("tmux", append([]string{"-L", s.socket, "-f", "/dev/null"}, args...)...)
}

func newTmux(t *testing.T, u *user, command string) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is needed for the interactive tests: apt-get install tmux")
	}
	s := &tmuxSession{t: t, name: "kg-" + strings.ReplaceAll(t.Name(), "/", "-"), socket: fmt.Sprintf("kg-e2e-%d-%d", os.Getpid(), tmuxServers.Add(1))}
	// The environment goes into the command: a running tmux server keeps
	// its own PATH for new sessions.
	var assignments []string
	for _, kv := range u.env {
		assignments = append(assignments, "'"+kv+"'")
	}
	args := []string{"new-session", "-d", "-s", s.name, "-x", "160", "-y", "50",
		"env " + strings.Join(assignments, " ") + " " + command + "; echo EXIT=$?; sleep 60"}
	if out, err := s.tmux(args...).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v: %s", err, out)
	}
	t.Cleanup(s.kill)
	return s
}

// kill ends the session's tmux server, and the session with it.
func (s *tmuxSession) kill() { _ = s.tmux("kill-server").Run() }

func (s *tmuxSession) screen() string {
	out, _ := s.tmux("capture-pane", "-p", "-t", s.name).Output()
	return string(out)
}

// waitFor waits until the screen shows text.
func (s *tmuxSession) waitFor(text string) {
	s.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(s.screen(), text) {
		if time.Now().After(deadline) {
			s.t.Fatalf("the terminal never showed %q; it shows:\n%s", text, s.screen())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// keys types keys one at a time, pausing after each as a person would: a
// form that is still moving its focus must not swallow the next keystroke.
func (s *tmuxSession) keys(keys ...string) {
	s.t.Helper()
	for _, k := range keys {
		if out, err := s.tmux("send-keys", "-t", s.name, k).CombinedOutput(); err != nil {
			s.t.Fatalf("send-keys: %v: %s", err, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// fillChange answers the change form: set replicas, the reason and the
// incident ("" leaves it empty).
func (s *tmuxSession) fillChange(replicas, reason, incident string) {
	s.t.Helper()
	s.waitFor("What change?")
	s.keys("Down", "Enter")
	s.waitFor("Replicas")
	s.keys(replicas, "Enter")
	s.waitFor("Reason")
	s.keys(reason, "Enter")
	s.waitFor("Incident")
	if incident != "" {
		s.keys(incident)
	}
	s.keys("Enter")
}

func TestBreakglassInteractiveForm(t *testing.T) {
	core(t)
	deployApp(t, "bg-form")
	term := newTmux(t, newUser(t, env.Oncall.Name), "kubectl gitops breakglass bg-form deployment/web")
	term.fillChange("5", "typed in the form", "INC-9")
	term.waitFor("Type the Application name (bg-form)")
	term.keys("bg-form", "Enter")
	term.waitFor("EXIT=")
	if screen := term.screen(); !strings.Contains(screen, "EXIT=0") || !strings.Contains(screen, "/spec/replicas: 2 -> 5") {
		t.Fatalf("the form's break-glass did not succeed:\n%s", screen)
	}
	// In a terminal, the fix being live is said as soon as it is.
	if screen := term.screen(); !strings.Contains(screen, "the fix is live: deployment.apps/web patched") {
		t.Errorf("no progress line in the terminal:\n%s", screen)
	}
	if n := replicasIn(context.Background(), t, "bg-form"); n != 5 {
		t.Fatalf("replicas after the form: %d, want 5", n)
	}
	var found bool
	for _, r := range allRecords(t) {
		if r.Application != nil && r.Application.Name == "bg-form" && r.Reason == "typed in the form" && r.Incident == "INC-9" {
			found = true
		}
	}
	if !found {
		t.Errorf("no audit record carries the reason and incident typed in the form")
	}
}

func TestBreakglassFormRefusesAWrongConfirmation(t *testing.T) {
	core(t)
	deployApp(t, "bg-form-no")
	term := newTmux(t, newUser(t, env.Oncall.Name), "kubectl gitops breakglass bg-form-no deployment/web --replicas 6 --reason nope")
	term.waitFor("Type the Application name (bg-form-no)")
	term.keys("bg-form", "Enter")
	term.waitFor("EXIT=")
	if screen := term.screen(); !strings.Contains(screen, "EXIT=1") || !strings.Contains(screen, "not confirmed") {
		t.Fatalf("a wrong confirmation went ahead:\n%s", screen)
	}
	if n := replicasIn(context.Background(), t, "bg-form-no"); n != 2 {
		t.Errorf("replicas %d after a refused confirmation", n)
	}
}

func TestBreakglassFormPicksTheApplicationAndResource(t *testing.T) {
	core(t)
	deployApp(t, "bg-pick")
	term := newTmux(t, newUser(t, env.Oncall.Name), "kubectl gitops breakglass")
	term.waitFor("Which Application?")
	term.keys("/", "bg-pick", "Enter")
	term.waitFor("Which resource of bg-pick?")
	if screen := term.screen(); !strings.Contains(screen, "Deployment bg-pick/web") || !strings.Contains(screen, "ConfigMap bg-pick/") {
		t.Fatalf("the resource picker does not list bg-pick's managed resources:\n%s", screen)
	}
	term.keys("/", "Deployment", "Enter")
	term.fillChange("3", "picked in the form", "")
	term.waitFor("Type the Application name (bg-pick)")
	if screen := term.screen(); !strings.Contains(screen, "-  replicas: 2") || !strings.Contains(screen, "+  replicas: 3") {
		t.Errorf("the plan shows no diff before the confirmation:\n%s", screen)
	}
	term.keys("bg-pick", "Enter")
	term.waitFor("EXIT=")
	if screen := term.screen(); !strings.Contains(screen, "EXIT=0") {
		t.Fatalf("the picked break-glass did not succeed:\n%s", screen)
	}
	if n := replicasIn(context.Background(), t, "bg-pick"); n != 3 {
		t.Fatalf("replicas after the form: %d, want 3", n)
	}
}

// TestForcedRestoreAsksForTheName: a forced restore in a terminal asks for
// the Application's name, as a break-glass does: a wrong name changes
// nothing, the right one restores.
func TestForcedRestoreAsksForTheName(t *testing.T) {
	deployApp(t, "rs-confirm")
	oncall := newUser(t, env.Oncall.Name)
	mustRun(t, oncall, 0, "breakglass", "rs-confirm", "deployment/web", "--replicas", "4", "--reason", "confirm test", "-y")
	for _, typed := range []string{"rs-other", "rs-confirm"} {
		term := newTmux(t, oncall, "kubectl gitops restore rs-confirm --force --reason 'abandoned'")
		term.waitFor("Type the Application name (rs-confirm)")
		if !strings.Contains(term.screen(), "Forcing the restore may revert the live fix.") {
			t.Errorf("the prompt does not say what going ahead does:\n%s", term.screen())
		}
		term.keys(typed, "Enter")
		term.waitFor("EXIT=")
		screen := term.screen()
		if typed == "rs-other" {
			if !strings.Contains(screen, "EXIT=1") || !strings.Contains(screen, `not confirmed: you typed "rs-other"`) {
				t.Fatalf("a wrong name went ahead:\n%s", screen)
			}
			sessionOf(t, "rs-confirm") // fails the test if the session is gone
		}
		if typed == "rs-confirm" && (!strings.Contains(screen, "EXIT=0") || !strings.Contains(screen, "forced restore of rs-confirm")) {
			t.Fatalf("the right name did not restore:\n%s", screen)
		}
		term.kill()
	}
}
