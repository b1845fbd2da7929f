//go:build e2e

// Package e2e runs the built kubectl-gitops binary the way a user does —
// through kubectl's plugin discovery, with a temporary HOME and KUBECONFIG —
// against the real components of test/env.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// testVersion is stamped into the binary under test, so the version test
// proves the binary on PATH is the one built here.
const testVersion = "v0.0.0-e2e"

var (
	testEnv *env.Env
	binDir  string
)

func TestMain(m *testing.M) {
	// The test binary doubles as the concurrent audit appender: a separate
	// process per writer, as separate on-call engineers would be.
	if os.Getenv(appenderEnv) != "" {
		os.Exit(appenderMain())
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if binDir, err = os.MkdirTemp("", "kubectl-gitops-e2e-bin-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(binDir)
	build := exec.Command("go", "build", "-o", filepath.Join(binDir, "kubectl-gitops"),
		"-ldflags", "-X github.com/kubectl-gitops/kubectl-gitops/plugin.version="+testVersion,
		"./cmd/kubectl-gitops")
	build.Dir = env.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building kubectl-gitops: %v\n%s", err, out)
		return 1
	}
	// kubectl (1.26+) completes "kubectl gitops …" through this script.
	script, err := os.ReadFile(filepath.Join(env.RepoRoot(), "kubectl_complete-gitops"))
	if err == nil {
		err = os.WriteFile(filepath.Join(binDir, "kubectl_complete-gitops"), script, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	if testEnv, err = env.Start(ctx, env.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "starting the test environment:", err)
		return 1
	}
	defer testEnv.Stop()
	fmt.Fprintf(os.Stderr, "test environment up in %s (%s)\n", time.Since(start).Round(time.Millisecond), testEnv.Dir)
	return m.Run()
}

// environment returns the shared environment and prints its logs if the
// calling test fails.
func environment(t *testing.T) *env.Env {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("test environment logs:\n%s", testEnv.LogTails(60))
		}
	})
	if err := testEnv.Exited(); err != nil {
		t.Fatalf("test environment is broken: %v", err)
	}
	return testEnv
}

// user is how a person runs commands: a temporary HOME, their own
// KUBECONFIG, and PATH with the plugin directory first.
type user struct {
	t   *testing.T
	env []string
}

func newUser(t *testing.T, name string, extraEnv ...string) *user {
	home := t.TempDir()
	return &user{t: t, env: append([]string{
		"HOME=" + home,
		"KUBECONFIG=" + testEnv.Kubeconfig(name),
		"PATH=" + binDir + string(os.PathListSeparator) + os.Getenv("PATH"),
		"NO_COLOR=1",
	}, extraEnv...)}
}

// run executes name with args and returns stdout, stderr and the exit code.
func (u *user) run(name string, args ...string) (stdout, stderr string, code int) {
	u.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = u.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if exitErr, ok := err.(*exec.ExitError); ok {
		code = exitErr.ExitCode()
	} else if err != nil {
		u.t.Fatalf("running %s %s: %v", name, strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), code
}

// kubectl runs the real kubectl, failing the test on a non-zero exit.
func (u *user) kubectl(args ...string) string {
	u.t.Helper()
	out, errOut, code := u.run("kubectl", args...)
	if code != 0 {
		u.t.Fatalf("kubectl %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}
