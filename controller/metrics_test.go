package controller

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
)

// TestMetricsSayWhatExists: the open sessions come from the informer's
// cache, each with its age and whether it expired; the counters count.
func TestMetricsSayWhatExists(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	opened := time.Now().Add(-90 * time.Second).UTC().Truncate(time.Second)
	add := func(name, session string) {
		app := &unstructured.Unstructured{Object: map[string]any{}}
		app.SetNamespace("argocd")
		app.SetName(name)
		if session != "" {
			app.SetAnnotations(map[string]string{breakglass.SessionAnnotation: session})
		}
		if err := store.Add(app); err != nil {
			t.Fatal(err)
		}
	}
	add("web", `{"id":"s1","openedAt":"`+opened.Format(time.RFC3339)+`","autoRestore":true,"expires":"2000-01-01T00:00:00Z"}`)
	add("api", "")
	m := &Metrics{}
	m.watch(store)
	m.setLeader(true)
	m.countAutoRestore()
	m.countNotice(audit.EventExpired)
	m.countError()
	var out strings.Builder
	m.write(&out, opened.Add(90*time.Second))
	for _, want := range []string{
		"\nkubectl_gitops_leader 1\n",
		"\nkubectl_gitops_open_sessions{namespace=\"argocd\",application=\"web\",auto_restore=\"true\"} 1\n",
		"\nkubectl_gitops_session_age_seconds{namespace=\"argocd\",application=\"web\"} 90\n",
		"\nkubectl_gitops_session_expired{namespace=\"argocd\",application=\"web\"} 1\n",
		"\nkubectl_gitops_auto_restores_total 1\n",
		"\nkubectl_gitops_expired_total 1\n",
		"\nkubectl_gitops_sync_reenabled_total 0\n",
		"\nkubectl_gitops_controller_errors_total 1\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), `application="api"`) {
		t.Errorf("an Application without a session is counted:\n%s", out.String())
	}
	var none *Metrics
	none.countError() // a nil Metrics counts nothing, and does not panic
}
