package argocd

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestAutomatedSchemaIsReadOncePerDocument: the answer is kept under the
// name the API server gives the schema document (its hash), so a second
// command does not fetch the document again; a new document (another
// hash: Argo CD upgraded) is read afresh, and without a cache directory
// every call reads it.
func TestAutomatedSchemaIsReadOncePerDocument(t *testing.T) {
	hash, automated := "AAAA", `{"properties":{"prune":{},"selfHeal":{}}}`
	var fetched atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/openapi/v3":
			_, _ = w.Write([]byte(`{"paths":{"apis/argoproj.io/v1alpha1":{"serverRelativeURL":"/openapi/v3/apis/argoproj.io/v1alpha1?hash=` + hash + `"}}}`))
		case "/openapi/v3/apis/argoproj.io/v1alpha1":
			if r.URL.Query().Get("hash") != hash {
				t.Errorf("schema fetched by %q, want hash %s", r.URL.RawQuery, hash)
			}
			fetched.Add(1)
			_, _ = w.Write([]byte(`{"components":{"schemas":{"io.argoproj.v1alpha1.Application":{"properties":{"spec":{"properties":{"syncPolicy":{"properties":{"automated":` + automated + `}}}}}}}}}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	client := func(cacheDir string) *Client {
		kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		return &Client{Kube: kube, CacheDir: cacheDir}
	}
	ask := func(c *Client, wantEnabled bool, wantFetched int32) {
		t.Helper()
		found, enabled, err := c.AutomatedSchema()
		if err != nil || !found || enabled != wantEnabled {
			t.Fatalf("AutomatedSchema = %v %v %v, want found, enabled %v", found, enabled, err, wantEnabled)
		}
		if got := fetched.Load(); got != wantFetched {
			t.Fatalf("the schema document was fetched %d times, want %d", got, wantFetched)
		}
	}
	dir := t.TempDir()
	ask(client(dir), false, 1)
	ask(client(dir), false, 1) // a new command: the kept answer
	hash, automated = "BBBB", `{"properties":{"enabled":{},"prune":{},"selfHeal":{}}}`
	ask(client(dir), true, 2) // a new document is read
	ask(client(dir), true, 2)
	ask(client(""), true, 3) // no cache: read every time
	ask(client(""), true, 4)
}

// TestSyncQueued: an operation set but not started (Argo CD's
// SetAppOperation clears operationState) is queued; one running or
// terminating is not, nor an Application with no operation.
func TestSyncQueued(t *testing.T) {
	for _, tt := range []struct {
		name   string
		object map[string]any
		want   bool
	}{
		{"no operation", map[string]any{"status": map[string]any{"operationState": map[string]any{"phase": "Succeeded"}}}, false},
		{"set, no state yet", map[string]any{"operation": map[string]any{"sync": map[string]any{}}}, true},
		{"set, the last sync's state", map[string]any{"operation": map[string]any{}, "status": map[string]any{"operationState": map[string]any{"phase": "Succeeded"}}}, true},
		{"running", map[string]any{"operation": map[string]any{}, "status": map[string]any{"operationState": map[string]any{"phase": "Running"}}}, false},
		{"terminating", map[string]any{"operation": map[string]any{}, "status": map[string]any{"operationState": map[string]any{"phase": "Terminating"}}}, false},
	} {
		if got := AppOf(&unstructured.Unstructured{Object: tt.object}).SyncQueued(); got != tt.want {
			t.Errorf("%s: SyncQueued %v, want %v", tt.name, got, tt.want)
		}
	}
}
