//go:build e2e

// Package e2e runs the built kubectl-gitops binary the way a user does —
// through kubectl's plugin discovery, with a temporary HOME and KUBECONFIG —
// against the real components of test/env.
package e2e

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
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
	if testEnv, err = env.Start(ctx, env.Options{APIOnly: os.Getenv("E2E_API_ONLY") != ""}); err != nil {
		fmt.Fprintln(os.Stderr, "starting the test environment:", err)
		return 1
	}
	defer testEnv.Stop()
	argo := "Argo CD " + testEnv.Argo.Version
	if !testEnv.ArgoRunning() {
		argo = "no Argo CD process (" + testEnv.Argo.Version + "'s CRDs); only the tests that need just the API server run"
	}
	fmt.Fprintf(os.Stderr, "test environment up in %s: Kubernetes %s, %s (%s)\n", time.Since(start).Round(time.Millisecond), testEnv.Kube.Version, argo, testEnv.Dir)
	code := m.Run()
	if names := failedTests(); len(names) > 0 {
		fmt.Fprintf(os.Stderr, "failed on Kubernetes %s, %s: %s (their output, with the environment's logs, is above)\n",
			testEnv.Kube.Version, argo, strings.Join(names, ", "))
	}
	return code
}

// failed holds the tests that failed, named once more after the run: a
// failing test's output ends with every component's logs, and CI keeps
// only the tail of what the run printed, where its name was not.
var failed sync.Map

// failedTests is failed's names, sorted.
func failedTests() []string {
	var names []string
	failed.Range(func(name, _ any) bool {
		names = append(names, name.(string))
		return true
	})
	sort.Strings(names)
	return names
}

// coreTests are the tests of the core loop (break-glass, status, restore,
// parents, failures, the admission policies, version), which also run
// against the older Argo CD release; each says so itself with core(t), so
// that renaming a test never drops it from a run.
var coreTests sync.Map

// core marks t part of the core loop.
func core(t *testing.T) { coreTests.Store(t.Name(), true) }

// apiOnlyTests are the tests that need the API server and kubectl but no
// Argo CD process (most of the admission policies' transitions and
// refusals). They alone run where the environment starts none
// (E2E_API_ONLY=1), which is how they run on the Kubernetes releases
// other than the default (KUBE_VERSION); each says so itself with
// apiOnly(t).
var apiOnlyTests sync.Map

// apiOnly marks t as needing no Argo CD process.
func apiOnly(t *testing.T) { apiOnlyTests.Store(t.Name(), true) }

// suite skips t when the environment runs the older Argo CD release (2.x)
// and t is not of the core loop: the whole suite runs against the current
// release, the core loop against both. Where no Argo CD process runs, it
// skips all but the tests that need none.
func suite(t *testing.T) {
	t.Helper()
	top, _, _ := strings.Cut(t.Name(), "/")
	if _, isCore := coreTests.Load(top); testEnv.Argo.Major() == 2 && !isCore {
		t.Skipf("not of the core loop, which alone runs against Argo CD %s", testEnv.Argo.Version)
	}
	if _, needsNoArgo := apiOnlyTests.Load(top); !testEnv.ArgoRunning() && !needsNoArgo {
		t.Skip("needs Argo CD's processes, which this environment does not run (E2E_API_ONLY)")
	}
	if i, n := shard(); n > 1 && shardOf(top, n) != i {
		t.Skipf("in shard %d of %d (E2E_SHARD), which another test process runs", shardOf(top, n), n)
	}
}

// shard is this process's share of the suite, E2E_SHARD=I/N (I from 0):
// make e2e runs the suite as N processes, each with an environment of its
// own, since the tests mostly wait on Argo CD's controller. 0/1 when unset.
func shard() (int, int) {
	var i, n int
	if _, err := fmt.Sscanf(os.Getenv("E2E_SHARD"), "%d/%d", &i, &n); err != nil || n < 1 || i < 0 || i >= n {
		return 0, 1
	}
	return i, n
}

// shardOf is the shard that runs test name: by a hash of its name, so
// that it does not change when other tests are added.
func shardOf(name string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32() % uint32(n))
}

// environment returns the shared environment and prints its logs if the
// calling test fails; it skips a test suite skips.
func environment(t *testing.T) *env.Env {
	t.Helper()
	suite(t)
	t.Cleanup(func() {
		if t.Failed() {
			failed.Store(t.Name(), true)
			t.Logf("test environment logs:\n%s", testEnv.LogTails(60))
		}
	})
	if err := testEnv.Exited(); err != nil {
		t.Fatalf("test environment is broken: %v", err)
	}
	return testEnv
}
