package plugin

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestTraceRequestsSaysWhereTimeGoes: with KUBECTL_GITOPS_TRACE set each API
// request is printed with its start, duration, method, path and status.
func TestTraceRequestsSaysWhereTimeGoes(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) }))
	defer server.Close()
	var out strings.Builder
	client := &http.Client{Transport: traceRequests(&out, time.Now())(http.DefaultTransport)}
	resp, err := client.Get(server.URL + "/api/v1/namespaces/argocd/configmaps/x?limit=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !regexp.MustCompile(`^trace: \+ *\d+ms +\d+ms GET /api/v1/namespaces/argocd/configmaps/x\?limit=1 404 Not Found\n$`).MatchString(out.String()) {
		t.Errorf("trace line %q", out.String())
	}
}
