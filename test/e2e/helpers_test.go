//go:build e2e

// Helpers every e2e test shares: users and how they run commands, clients,
// fixtures, waits. Tests live in the files named for what they test.

package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
	"github.com/kubectl-gitops/kubectl-gitops/test/jiradouble"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
)

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

// argoUser is an on-call engineer with the Argo CD API configured, which
// enables the field-level catch-up check.
func argoUser(t *testing.T) *user { t.Helper(); return argoAs(t, env.Oncall.Name) }

// argoAs is the user name with the Argo CD API configured.
func argoAs(t *testing.T, name string) *user {
	t.Helper()
	token, err := testEnv.ArgoToken(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return newUser(t, name, "ARGOCD_SERVER="+testEnv.ArgoServerAddr, "ARGOCD_AUTH_TOKEN="+token, "ARGOCD_OPTS=--plaintext")
}

func mustRun(t *testing.T, u *user, want int, args ...string) (string, string) {
	t.Helper()
	out, errOut, code := u.run("kubectl", append([]string{"gitops"}, args...)...)
	if code != want {
		t.Fatalf("kubectl gitops %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out, errOut)
	}
	return out, errOut
}

func statusJSON(t *testing.T, u *user, app string) *breakglass.SessionStatus {
	t.Helper()
	out, _, _ := u.run("kubectl", "gitops", "status", app, "-o", "json")
	var sts []*breakglass.SessionStatus
	if err := json.Unmarshal([]byte(out), &sts); err != nil || len(sts) != 1 {
		t.Fatalf("status -o json: %v: %s", err, out)
	}
	return sts[0]
}

func kubeFor(t *testing.T, user string) kubernetes.Interface {
	t.Helper()
	config, err := testEnv.RESTConfig(user)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(config)
}

// fullPolicy is a sync policy with every part restore must keep.
var fullPolicy = map[string]any{
	"automated":   map[string]any{"prune": true, "selfHeal": true, "allowEmpty": true},
	"syncOptions": []any{"ApplyOutOfSyncOnly=true", "Validate=true"},
	"retry":       map[string]any{"limit": int64(2), "backoff": map[string]any{"duration": "5s", "factor": int64(2), "maxDuration": "1m"}},
}

// deployApp commits a copy of the fixture application for one test, with
// its resources in a namespace of its own, creates a self-healing
// Application for it and waits until Argo CD has synced it.
func deployApp(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	return deployAppTo(t, name, argocd.InClusterServer)
}

// deployAppTo is deployApp with the Application's destination server.
func deployAppTo(t *testing.T, name, server string) *unstructured.Unstructured {
	t.Helper()
	head := createApp(t, name, func(app *unstructured.Unstructured, _ string) {
		if err := unstructured.SetNestedField(app.Object, server, "spec", "destination", "server"); err != nil {
			t.Fatal(err)
		}
	})
	return waitSynced(t, name, head)
}

// createApp commits an application like the fixture's at apps/NAME,
// creates namespace NAME and a self-healing Application NAME deploying it,
// changed first by edit (which gets the commit) when not nil, and returns
// the commit.
func createApp(t *testing.T, name string, edit func(app *unstructured.Unstructured, head string)) string {
	t.Helper()
	return createAppFrom(t, name, env.AppFiles("apps/"+name, name, env.FixtureImage), "apps/"+name, edit)
}

// createAppFrom is createApp with files of its own, the Application's
// source at path.
func createAppFrom(t *testing.T, name string, files map[string]string, path string, edit func(app *unstructured.Unstructured, head string)) string {
	t.Helper()
	e := environment(t)
	ctx := context.Background()
	head, err := e.Git.Commit("add "+name, files)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.TeamNamespace(ctx, kubeFor(t, env.Admin.Name), name); err != nil {
		t.Fatal(err)
	}
	app := e.Application(name, path, name, runtimeCopy(fullPolicy))
	if edit != nil {
		edit(app, head)
	}
	if _, err := appsClient(t).Create(ctx, app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropApp(t, name) })
	return head
}

// dropApp deletes Application name once its test is over (it has no
// finalizer: what it deployed stays). Argo CD's controller refreshes every
// Application at each resync and renders each again at every commit of
// the shared repository, each refresh a write of the Application the
// admission policies judge: kept, a shard's hundred Applications of
// finished tests kept its two cores busy for the tests still running.
func dropApp(t *testing.T, name string) {
	err := appsClient(t).Delete(context.Background(), name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Logf("deleting Application %s after the test: %v", name, err)
	}
}

// waitSynced waits until Argo CD reports the Application Synced, at
// revision when it is not "", and returns the Application.
func waitSynced(t *testing.T, name, revision string) *unstructured.Unstructured {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var got *unstructured.Unstructured
	waitFor(ctx, t, name+" Synced "+revision, func() (bool, string) {
		a, err := appsClient(t).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got = a
		status, _, _ := unstructured.NestedString(a.Object, "status", "sync", "status")
		rev, _, _ := unstructured.NestedString(a.Object, "status", "sync", "revision")
		return status == "Synced" && (revision == "" || rev == revision), status + " at " + rev
	})
	return got
}

// pausedFullPolicy is fullPolicy as the pause leaves it: on Argo CD >= 3.1
// automated stays with enabled: false (prune and selfHeal kept visible); on
// 2.14, whose schema has no enabled, automated is removed.
func pausedFullPolicy() map[string]any {
	want := runtimeCopy(fullPolicy)
	if testEnv.Argo.Major() >= 3 {
		want["automated"].(map[string]any)["enabled"] = false
	} else {
		delete(want, "automated")
	}
	return want
}

// autoSyncOn is whether a sync policy has automated sync on: automated set
// and not disabled (Argo CD >= 3.1 has automated.enabled).
func autoSyncOn(policy map[string]any) bool {
	auto, ok := policy["automated"].(map[string]any)
	if !ok {
		return false
	}
	enabled, set := auto["enabled"].(bool)
	return !set || enabled
}

func runtimeCopy(m map[string]any) map[string]any {
	return runtimeDeepCopy(m).(map[string]any)
}

func runtimeDeepCopy(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func appsClient(t *testing.T) dynamic.ResourceInterface {
	return kubeDynamic(t).Resource(argocd.ApplicationGVR).Namespace(testEnv.ArgoNamespace)
}

func imageIn(ctx context.Context, t *testing.T, ns string) string {
	d, err := kubeFor(t, env.Admin.Name).AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

// allRecords reads the whole audit log of the Applications' namespace.
func allRecords(t *testing.T) []*audit.Record {
	t.Helper()
	store := audit.NewConfigMapStore(kubeFor(t, env.Admin.Name), testEnv.ArgoNamespace)
	entries, err := store.Entries(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return audit.Records(entries)
}

func replicasIn(ctx context.Context, t *testing.T, ns string) int32 {
	d, err := kubeFor(t, env.Admin.Name).AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return *d.Spec.Replicas
}

func sessionRecords(t *testing.T, session string) []*audit.Record {
	var out []*audit.Record
	for _, r := range allRecords(t) {
		if r.Session == session {
			out = append(out, r)
		}
	}
	return out
}

// headSeq is the audit log's newest sequence number, 0 while it is empty.
func headSeq(t *testing.T, store *audit.ConfigMapStore) uint64 {
	t.Helper()
	head, err := store.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if head == nil {
		return 0
	}
	return head.Seq
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func deploymentImage(ctx context.Context, t *testing.T, kube kubernetes.Interface) string {
	t.Helper()
	d, err := kube.AppsV1().Deployments(env.DemoNamespace).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

// waitFor polls cond every 200ms until it holds, failing the test with the
// last state cond described when ctx ends.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		var ok bool
		ok, last = cond()
		return ok, nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s; last: %s", what, last)
	}
}

// kubeDynamic is a dynamic client as the cluster admin.
func kubeDynamic(t *testing.T) dynamic.Interface {
	config, err := testEnv.RESTConfig(env.Admin.Name)
	if err != nil {
		t.Fatal(err)
	}
	return dynamic.NewForConfigOrDie(config)
}

var appProjectsGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "appprojects"}

// headSeqOf is the audit log's newest sequence number.
func headSeqOf(t *testing.T) uint64 {
	t.Helper()
	return headSeq(t, audit.NewConfigMapStore(kubeFor(t, env.Admin.Name), testEnv.ArgoNamespace))
}

// hmacHex is the hex HMAC-SHA256 of b under key, as openssl computes it.
func hmacHex(key string, b []byte) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write(b)
	return hex.EncodeToString(m.Sum(nil))
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "patch.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// grantOncall lets the on-call group patch resources in namespace, as a
// cluster's own RBAC would for the teams' namespaces.
func grantOncall(t *testing.T, namespace string, resources ...string) {
	t.Helper()
	kube := kubeFor(t, env.Admin.Name)
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "oncall-patch"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: resources, Verbs: []string{"get", "list", "watch", "patch"}}}}
	if _, err := kube.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "oncall-patch"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "oncall-patch"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: env.Oncall.Groups[0]}},
	}
	if _, err := kube.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// jiraText is text as the ticket escapes it in Jira markup.
func jiraText(s string) string { return strings.ReplaceAll(s, "-", `\-`) }

// engineAs builds the engine in-process for user, so a test can use its
// AfterPause hook.
func engineAs(t *testing.T, user string) *breakglass.Engine {
	t.Helper()
	config, err := testEnv.RESTConfig(user)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(config)
	return &breakglass.Engine{
		Client: argocd.Client{Kube: kube, Dynamic: dynamic.NewForConfigOrDie(config),
			Mapper:       restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery())),
			AppNamespace: testEnv.ArgoNamespace},
		Audit: audit.NewConfigMapStore(kube, testEnv.ArgoNamespace),
	}
}

// planHotfix plans, as oncall in-process, the hotfix image for app.
func planHotfix(t *testing.T, app string) (*breakglass.Engine, *breakglass.Plan) {
	t.Helper()
	engine := engineAs(t, env.Oncall.Name)
	plan, err := engine.Plan(context.Background(), breakglass.Request{App: app, Target: "deployment/web", Reason: "failure test",
		Patch: breakglass.PatchSpec{Images: map[string]string{"web": "registry.example/web:hotfix"}}})
	if err != nil {
		t.Fatal(err)
	}
	return engine, plan
}

func syncPolicyOf(t *testing.T, name string) map[string]any {
	t.Helper()
	app, err := appsClient(t).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, _, _ := unstructured.NestedMap(app.Object, "spec", "syncPolicy")
	return p
}

func startJira(t *testing.T) *jiradouble.Server {
	d := jiradouble.Start(t, jiradouble.Options{Project: "OPS", User: jiraUserName, Token: jiraToken})
	t.Cleanup(d.Close)
	return d
}

// jiraEnv configures Jira for a user, as an on-call engineer's shell would.
func jiraEnv(url, token string, extra ...string) []string {
	return append([]string{"JIRA_URL=" + url, "JIRA_PROJECT=OPS", "JIRA_USER=" + jiraUserName, "JIRA_API_TOKEN=" + token, "JIRA_TIMEOUT=2s"}, extra...)
}

// unreachableURL is a loopback address nothing listens on.
func unreachableURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func sessionOf(t *testing.T, app string) *breakglass.Session {
	t.Helper()
	a, err := appsClient(t).Get(context.Background(), app, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := breakglass.ParseSession(a.GetAnnotations()[breakglass.SessionAnnotation])
	if err != nil {
		t.Fatal(err)
	}
	return s
}
