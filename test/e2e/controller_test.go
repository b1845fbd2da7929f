//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// controllerSA is the shipped controller's ServiceAccount (deploy/controller).
const controllerSA = "system:serviceaccount:" + env.ArgoNamespace + ":kubectl-gitops-controller"

// replica is one `kubectl gitops controller` process, running as the
// shipped ServiceAccount with a token of its own, as a pod would.
type replica struct {
	identity string
	cmd      *exec.Cmd
	mu       sync.Mutex
	log      strings.Builder
	addr     string
}

func (r *replica) logs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.String()
}

// metrics scrapes the replica's /metrics.
func (r *replica) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + r.addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// stop kills the replica as a node failure would: no lease release.
func (r *replica) kill() {
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	_ = r.cmd.Wait()
}

var controllerRBAC sync.Once

// controllerKubeconfig applies deploy/controller/rbac.yaml (once) and
// writes a kubeconfig with a token of its ServiceAccount, as a pod has.
func controllerKubeconfig(t *testing.T) string {
	t.Helper()
	e := environment(t)
	admin := newUser(t, env.Admin.Name)
	controllerRBAC.Do(func() {
		admin.kubectl("apply", "-f", filepath.Join(env.RepoRoot(), "deploy", "controller", "rbac.yaml"))
	})
	token := serviceAccountToken(t, "kubectl-gitops-controller")
	adminConfig, err := e.RESTConfig(env.Admin.Name)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["test"] = &clientcmdapi.Cluster{Server: adminConfig.Host, CertificateAuthorityData: adminConfig.CAData}
	kubeconfig.AuthInfos["controller"] = &clientcmdapi.AuthInfo{Token: token}
	kubeconfig.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "controller"}
	kubeconfig.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// serviceAccountToken is a token of ServiceAccount name in Argo CD's
// namespace, from the API server, as a pod has one.
func serviceAccountToken(t *testing.T, name string) string {
	t.Helper()
	expiry := int64(3600)
	token, err := kubeFor(t, env.Admin.Name).CoreV1().ServiceAccounts(env.ArgoNamespace).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return token.Status.Token
}

// startReplica starts the controller with a token of its own, and extra
// environment (Jira's); the replica stops with the test.
func startReplica(t *testing.T, identity string, extraEnv ...string) *replica {
	t.Helper()
	return startReplicaWith(t, identity, []string{"--audit-namespace", environment(t).ArgoNamespace}, extraEnv)
}

// startReplicaWith starts the controller with args after the common ones
// (the audit namespace among them) and extra environment.
func startReplicaWith(t *testing.T, identity string, args, extraEnv []string) *replica {
	t.Helper()
	e := environment(t)
	path := controllerKubeconfig(t)
	r := &replica{identity: identity}
	r.cmd = exec.Command(filepath.Join(binDir, "kubectl-gitops"), append([]string{"controller",
		"--app-namespace", e.ArgoNamespace, "--argocd-namespace", e.ArgoNamespace,
		"--lease-namespace", e.ArgoNamespace, "--lease-duration", "3s", "--identity", identity,
		"--address", "127.0.0.1:0", "--resync", "2s", "--refresh-every", "2s"}, args...)...)
	r.cmd.Env = append([]string{"HOME=" + t.TempDir(), "KUBECONFIG=" + path, "PATH=" + os.Getenv("PATH")}, extraEnv...)
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	serving := make(chan string, 1)
	go func() {
		scan := bufio.NewScanner(stderr)
		addr := regexp.MustCompile(`on (127\.0\.0\.1:\d+)$`)
		for scan.Scan() {
			line := scan.Text()
			r.mu.Lock()
			r.log.WriteString(line + "\n")
			r.mu.Unlock()
			if m := addr.FindStringSubmatch(line); m != nil {
				serving <- m[1]
			}
		}
	}()
	t.Cleanup(func() {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		_ = r.cmd.Wait()
		if t.Failed() {
			t.Logf("controller %s:\n%s", identity, r.logs())
		}
	})
	select {
	case r.addr = <-serving:
	case <-time.After(30 * time.Second):
		t.Fatalf("controller %s did not start:\n%s", identity, r.logs())
	}
	return r
}

// leaderOf waits until exactly one of replicas says it leads, and returns it.
func leaderOf(t *testing.T, within time.Duration, replicas ...*replica) *replica {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var leader *replica
	waitFor(ctx, t, "one replica to lead", func() (bool, string) {
		leader = nil
		n := 0
		for _, r := range replicas {
			if strings.Contains(r.metrics(t), "\nkubectl_gitops_leader 1\n") {
				leader, n = r, n+1
			}
		}
		return n == 1, fmt.Sprintf("%d leading", n)
	})
	return leader
}

// TestControllerRestoresWhenGitCatchesUp: two replicas of the controller,
// each with its own ServiceAccount token, elect one leader. A session
// marked auto-restore is restored with no person once Git catches up,
// recorded once, by the controller; a session whose Git has not caught up
// stays open. The leader killed, the other takes over within the lease,
// and restores nothing twice. /metrics says what exists.
func TestControllerRestoresWhenGitCatchesUp(t *testing.T) {
	core(t)
	e := environment(t)
	jira := startJira(t)
	a, b := startReplica(t, "replica-a", jiraEnv(jira.URL, jiraToken)...), startReplica(t, "replica-b", jiraEnv(jira.URL, jiraToken)...)
	leader := leaderOf(t, 30*time.Second, a, b)
	follower := a
	if leader == a {
		follower = b
	}

	deployApp(t, "cr-auto")
	deployApp(t, "cr-wait")
	deployApp(t, "cr-expire")
	deployApp(t, "cr-toggle")
	oncall := newUser(t, env.Oncall.Name, jiraEnv(jira.URL, jiraToken)...)
	for _, app := range []string{"cr-auto", "cr-wait"} {
		mustRun(t, oncall, 0, "breakglass", app, "deployment/web", "--image", "web=registry.example/web:hotfix", "--reason", "controller", "--auto-restore", "-y")
	}
	mustRun(t, oncall, 0, "breakglass", "cr-expire", "deployment/web", "--image", "web=registry.example/web:hotfix", "--reason", "short", "--expires", "3s", "-y")
	mustRun(t, oncall, 0, "breakglass", "cr-toggle", "deployment/web", "--image", "web=registry.example/web:hotfix", "--reason", "toggled", "-y")
	admin := newUser(t, env.Admin.Name)
	admin.kubectl("-n", e.ArgoNamespace, "patch", "application", "cr-toggle", "--type", "merge", "-p",
		`{"spec":{"syncPolicy":{"automated":{"enabled":true,"prune":true,"selfHeal":true}}}}`)
	if m := leader.metrics(t); !strings.Contains(m, `kubectl_gitops_open_sessions{application="cr-auto",auto_restore="true",namespace="argocd"} 1`) {
		// The cache is event-driven: give it a moment.
		time.Sleep(2 * time.Second)
		if m = leader.metrics(t); !strings.Contains(m, `application="cr-auto"`) {
			t.Errorf("metrics before the restore:\n%s", m)
		}
	}
	session := sessionOf(t, "cr-auto").ID

	// The fix reaches Git for cr-auto only.
	if _, err := e.Git.Commit("cr-auto: the hotfix", env.AppFiles("apps/cr-auto", "cr-auto", "registry.example/web:hotfix")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitFor(ctx, t, "the controller to restore cr-auto", func() (bool, string) {
		a, err := appsClient(t).Get(ctx, "cr-auto", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		_, open := a.GetAnnotations()[breakglass.SessionAnnotation]
		return !open, "session still open"
	})
	// The annotation goes before the restore ends: the ticket is closed,
	// the succeeded record written and the restore counted after it.
	waitFor(ctx, t, "the controller to count the restore of cr-auto", func() (bool, string) {
		m := leader.metrics(t)
		return strings.Contains(m, "\nkubectl_gitops_auto_restores_total 1\n"), "not counted yet"
	})
	restored := 0
	for _, r := range sessionRecords(t, session) {
		if r.Event == audit.EventRestored && r.Outcome.Status == audit.StatusSucceeded {
			restored++
			if r.Actor.Username != controllerSA {
				t.Errorf("restored by %s, want the controller's ServiceAccount", r.Actor.Username)
			}
		}
	}
	if restored != 1 {
		t.Errorf("%d succeeded restore records for session %s, want 1", restored, session)
	}
	if _, open := sessionOfApp(t, "cr-wait"); !open {
		t.Error("cr-wait, whose Git has not caught up, was restored")
	}
	// The controller closed the ticket, saying Git caught up.
	if issues := sessionIssues(jira, session); len(issues) != 1 || issues[0].Status != "Done" || !strings.Contains(strings.Join(issues[0].Comments, "\n"), "sync restored by "+jiraText(controllerSA)) {
		t.Errorf("cr-auto's ticket after the controller's restore: %+v", issues)
	}
	if m := leader.metrics(t); !strings.Contains(m, "\nkubectl_gitops_auto_restores_total 1\n") || strings.Contains(m, `application="cr-auto"`) || !strings.Contains(m, `application="cr-wait"`) {
		t.Errorf("metrics after the restore:\n%s", m)
	}
	// Beside them: its requests to the API server, its work queue, the Go
	// runtime and the process.
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`\nrest_client_requests_total\{code="200",host="[^"]+",method="GET"\} [1-9]`),
		regexp.MustCompile(`\nrest_client_request_duration_seconds_count\{host="[^"]+",verb="GET"\} [1-9]`),
		regexp.MustCompile(`\nworkqueue_adds_total\{name="applications"\} [1-9]`),
		regexp.MustCompile(`\ngo_goroutines [1-9]`),
		regexp.MustCompile(`\nprocess_start_time_seconds [1-9]`),
	} {
		if m := leader.metrics(t); !want.MatchString(m) {
			t.Errorf("metrics lack %s:\n%s", want, m)
		}
	}

	// The expired session and the one whose sync came back on are noticed
	// once each, as records by the controller and Warning Events; the
	// expired one stays paused.
	for app, event := range map[string]audit.Event{"cr-expire": audit.EventExpired, "cr-toggle": audit.EventReenabled} {
		id := sessionOf(t, app).ID
		waitFor(ctx, t, "the controller to record "+string(event)+" on "+app, func() (bool, string) {
			n := 0
			for _, r := range sessionRecords(t, id) {
				if r.Event == event && r.Actor.Username == controllerSA {
					n++
				}
			}
			return n == 1, fmt.Sprintf("%d records", n)
		})
	}
	expiredSession := sessionOf(t, "cr-expire").ID
	if issues := sessionIssues(jira, expiredSession); len(issues) != 1 || !strings.Contains(strings.Join(issues[0].Comments, "\n"), "expired at") || issues[0].Status == "Done" {
		t.Errorf("cr-expire's ticket after the expiry: %+v", issues)
	}
	events := admin.kubectl("-n", e.ArgoNamespace, "get", "events", "--field-selector", "type=Warning", "-o", "jsonpath={range .items[*]}{.involvedObject.name}/{.reason}{\"\\n\"}{end}")
	for _, want := range []string{"cr-expire/Expired", "cr-toggle/SyncReenabled"} {
		if !strings.Contains(events, want) {
			t.Errorf("warning events:\n%s\nwant %s", events, want)
		}
	}
	if st := statusJSON(t, oncall, "cr-expire"); !st.Expired {
		t.Errorf("status of cr-expire: expired %v", st.Expired)
	}
	if enabled, _, _ := unstructured.NestedBool(syncPolicyOf(t, "cr-expire"), "automated", "enabled"); enabled {
		t.Error("the expiry re-enabled sync")
	}
	if m := leader.metrics(t); !strings.Contains(m, "\nkubectl_gitops_expired_total 1\n") || !strings.Contains(m, "\nkubectl_gitops_sync_reenabled_total 1\n") {
		t.Errorf("metrics after the notices:\n%s", m)
	}

	// The leader dies without releasing the lease: the other takes over
	// within it, and restores nothing again.
	leader.kill()
	if next := leaderOf(t, 15*time.Second, follower); next != follower {
		t.Fatalf("the follower did not take over")
	}
	time.Sleep(4 * time.Second) // a resync or two of the new leader
	if m := follower.metrics(t); !strings.Contains(m, "\nkubectl_gitops_auto_restores_total 0\n") {
		t.Errorf("the new leader restored again:\n%s", m)
	}
	for _, app := range []string{"cr-wait", "cr-expire", "cr-toggle"} {
		mustRun(t, oncall, 0, "restore", app, "--force", "--reason", "test over", "-y")
	}
	// Honest closes, one with sync on behind it (cr-toggle), raced by the
	// leader's reads: none of them is a session annotation nobody's.
	time.Sleep(3 * time.Second)
	for _, r := range allRecords(t) {
		if r.Event == audit.EventOrphaned && r.Application != nil && strings.HasPrefix(r.Application.Name, "cr-") {
			t.Errorf("an honest session was recorded as an orphan: %s", r.Reason)
		}
	}
}

// sessionOfApp says whether app has an open session.
func sessionOfApp(t *testing.T, app string) (string, bool) {
	t.Helper()
	a, err := appsClient(t).Get(context.Background(), app, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, open := a.GetAnnotations()[breakglass.SessionAnnotation]
	return v, open
}

// TestControllerMayOnlyRestore: the controller's ServiceAccount is held by
// the admission policies to what it does: through real kubectl with its
// token, it may not pause an Application (open a session) nor append a
// record of another kind than restore, notice and ticket.
func TestControllerMayOnlyRestore(t *testing.T) {
	core(t)
	e := environment(t)
	deployApp(t, "cr-attack")
	sa := &user{t: t, env: []string{"HOME=" + t.TempDir(), "KUBECONFIG=" + controllerKubeconfig(t), "PATH=" + os.Getenv("PATH")}}
	pause := `{"metadata":{"annotations":{"kubectl-gitops.io/session":"{\"id\":\"cr-forged\",\"state\":\"paused\"}"}},"spec":{"syncPolicy":{"automated":{"enabled":false}}}}`
	if e.Argo.Major() == 2 {
		pause = `{"metadata":{"annotations":{"kubectl-gitops.io/session":"{\"id\":\"cr-forged\",\"state\":\"paused\"}"}},"spec":{"syncPolicy":{"automated":null}}}`
	}
	if _, errOut, code := sa.run("kubectl", "-n", e.ArgoNamespace, "patch", "application", "cr-attack", "--type", "merge", "-p", pause); code == 0 || !strings.Contains(errOut, "the kubectl gitops controller may only restore application cr-attack") {
		t.Errorf("the controller opened a session: exit %d, %s", code, errOut)
	}
	if _, errOut, code := sa.run("kubectl", "-n", e.ArgoNamespace, "annotate", "application", "cr-attack", "kubectl-gitops.io/debt={}"); code == 0 || !strings.Contains(errOut, "may only restore") {
		t.Errorf("the controller wrote a debt note: exit %d, %s", code, errOut)
	}
	store := audit.NewConfigMapStore(kubeFromKubeconfig(t, sa.env[1][len("KUBECONFIG="):]), e.ArgoNamespace)
	err := store.Append(context.Background(), &audit.Record{Event: audit.EventPlanned, Session: "cr-forged", Actor: audit.Actor{Username: controllerSA},
		Application: &audit.AppRef{Namespace: e.ArgoNamespace, Name: "cr-attack"}, Outcome: audit.Outcome{Status: audit.StatusStarted}})
	if err == nil || !strings.Contains(err.Error(), "may append only restore, notice, proposal, resolved-run and ticket records") {
		t.Errorf("the controller appended a planned record: %v", err)
	}
	// A notice is the controller's: one written ahead by on-call would
	// silence its own.
	oncallStore := audit.NewConfigMapStore(kubeFor(t, env.Oncall.Name), e.ArgoNamespace)
	err = oncallStore.Append(context.Background(), &audit.Record{Event: audit.EventExpired, Session: "cr-forged", Actor: audit.Actor{Username: env.Oncall.Name},
		Application: &audit.AppRef{Namespace: e.ArgoNamespace, Name: "cr-attack"}, Outcome: audit.Outcome{Status: audit.StatusSucceeded}})
	if err == nil || !strings.Contains(err.Error(), "only the kubectl gitops controller appends expiry and re-enabled-sync notices") {
		t.Errorf("on-call appended a notice: %v", err)
	}
}

func kubeFromKubeconfig(t *testing.T, path string) kubernetes.Interface {
	t.Helper()
	config, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(config)
}
