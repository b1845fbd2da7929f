//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// TestNotificationsTellOfSessions: Argo CD's own notifications controller
// (from the Argo CD module under test, as a process with a ServiceAccount
// token of its own), given the shipped deploy/notifications triggers and
// templates and a webhook service, posts once per session when a
// break-glass opens, when its pause expires, when sync is turned back on
// behind it, and when it is closed (here by a forced restore).
func TestNotificationsTellOfSessions(t *testing.T) {
	e := environment(t)
	if e.Argo.Major() == 2 {
		t.Skip("the shipped triggers use expr of Argo CD 3.x")
	}
	ctx := context.Background()
	var mu sync.Mutex
	var posted []map[string]any
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("the webhook got a body that is not JSON: %s", body)
		}
		mu.Lock()
		posted = append(posted, m)
		mu.Unlock()
	}))
	defer sink.Close()

	// The shipped ConfigMap, with a webhook service and a subscription.
	data, err := os.ReadFile(filepath.Join(env.RepoRoot(), "deploy", "notifications", "argocd-notifications-cm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(data, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["service.webhook.kubectl-gitops"] = "url: " + sink.URL + "\n"
	cm.Data["subscriptions"] = "- recipients: [kubectl-gitops]\n  triggers: [on-breakglass-opened, on-breakglass-expired, on-breakglass-reenabled, on-breakglass-closed]\n"
	admin := kubeFor(t, env.Admin.Name)
	if _, err := admin.CoreV1().ConfigMaps(e.ArgoNamespace).Create(ctx, &cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Secrets(e.ArgoNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "argocd-notifications-secret"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().ConfigMaps(e.ArgoNamespace).Delete(ctx, "argocd-notifications-cm", metav1.DeleteOptions{})
		_ = admin.CoreV1().Secrets(e.ArgoNamespace).Delete(ctx, "argocd-notifications-secret", metav1.DeleteOptions{})
	})

	// Its own ServiceAccount, with what Argo CD's install gives it.
	const sa = "argocd-notifications-controller"
	if _, err := admin.CoreV1().ServiceAccounts(e.ArgoNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"argoproj.io"}, Resources: []string{"applications", "appprojects"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "list", "watch"}},
	}}
	if _, err := admin.RbacV1().Roles(e.ArgoNamespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: sa},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: e.ArgoNamespace}}}
	if _, err := admin.RbacV1().RoleBindings(e.ArgoNamespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := serviceAccountToken(t, sa)
	config, err := e.RESTConfig(env.Admin.Name)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, config.CAData, 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	cmd := exec.Command(e.ArgoBinary, "--server", config.Host, "--token", token, "--certificate-authority", caFile,
		"--namespace", e.ArgoNamespace, "--argocd-repo-server", e.RepoServerAddr, "--argocd-repo-server-plaintext",
		"--metrics-port", fmt.Sprint(port), "--loglevel", "debug")
	cmd.Env = append(os.Environ(), "ARGOCD_BINARY_NAME=argocd-notifications")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("notifications controller:\n%s", logs.String())
		}
	})

	deployApp(t, "nt-web")
	oncall := argoUser(t)
	mustRun(t, oncall, 0, "breakglass", "nt-web", "deployment/web", "--replicas", "3", "--reason", "notify", "--expires", "5s", "-y")
	session := sessionOf(t, "nt-web").ID
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	events := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, p := range posted {
			s, _ := p["session"].(string)
			if p["application"] == e.ArgoNamespace+"/nt-web" && strings.Contains(s, session) {
				out = append(out, fmt.Sprint(p["event"]))
			}
		}
		return out
	}
	waitFor(waitCtx, t, "the notifications of opened and expired", func() (bool, string) {
		got := strings.Join(events(), ",")
		return strings.Contains(got, "opened") && strings.Contains(got, "expired"), got
	})
	newUser(t, env.Admin.Name).kubectl("-n", e.ArgoNamespace, "patch", "application", "nt-web", "--type", "merge", "-p",
		`{"spec":{"syncPolicy":{"automated":{"enabled":true,"prune":true,"selfHeal":true}}}}`)
	waitFor(waitCtx, t, "the notification of sync turned back on", func() (bool, string) {
		got := strings.Join(events(), ",")
		return strings.Contains(got, "reenabled"), got
	})
	mustRun(t, oncall, 0, "restore", "nt-web", "--force", "--reason", "test over", "-y")
	waitFor(waitCtx, t, "the notification of the close", func() (bool, string) {
		got := strings.Join(events(), ",")
		return strings.Contains(got, "closed"), got
	})
	time.Sleep(2 * time.Second) // more reconciles: each still once per session
	got := events()
	slices.Sort(got)
	if want := []string{"closed", "expired", "opened", "reenabled"}; !slices.Equal(got, want) {
		t.Errorf("notifications for session %s: %v, want %v once each", session, got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range posted {
		if p["application"] == e.ArgoNamespace+"/nt-web" && p["event"] == "closed" && p["session"] != `{"id":"`+session+`","closed":"forced"}` {
			t.Errorf("the close's notification names %v, want session %s closed forced", p["session"], session)
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
