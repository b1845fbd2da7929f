package argocd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func TestServerFromConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	config := `contexts:
- name: prod
  server: argocd.example.com
  user: prod-user
- name: local
  server: 127.0.0.1:8080
  user: local-user
current-context: prod
servers:
- server: argocd.example.com
  grpc-web: true
- server: 127.0.0.1:8080
  plain-text: true
  insecure: true
users:
- name: prod-user
  auth-token: tok-prod-9f8e7d
- name: local-user
  auth-token: tok-local-1a2b3c
`
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	s, ok, err := ServerFromConfig(path, "")
	if err != nil || !ok || s.Addr != "argocd.example.com" || s.Token != "tok-prod-9f8e7d" || s.Plaintext || s.URL() != "https://argocd.example.com" {
		t.Errorf("current context: %+v %v %v", s, ok, err)
	}
	s, ok, err = ServerFromConfig(path, "local")
	if err != nil || !ok || s.Token != "tok-local-1a2b3c" || !s.Plaintext || !s.Insecure || s.URL() != "http://127.0.0.1:8080" {
		t.Errorf("named context: %+v %v %v", s, ok, err)
	}
	_, _, err = ServerFromConfig(path, "staging")
	if err == nil || !strings.Contains(err.Error(), `argocd context "staging": not a context`) || strings.Contains(err.Error(), "tok-") {
		t.Errorf("unknown context: %v", err)
	}
	if _, ok, err := ServerFromConfig(filepath.Join(t.TempDir(), "none"), ""); ok || err != nil {
		t.Errorf("no configuration: %v %v", ok, err)
	}
}

// TestServerReusesConnections: every request built a new client and
// transport, so that drift -A over a thousand Applications dialled (and,
// over TLS, handshook) a thousand times; the workers now keep theirs.
func TestServerReusesConnections(t *testing.T) {
	var dialled atomic.Int32
	api := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, `{"Version":"v3.6.1"}`)
	}))
	api.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			dialled.Add(1)
		}
	}
	api.StartTLS()
	defer api.Close()
	s := Server{Addr: strings.TrimPrefix(api.URL, "https://"), Insecure: true}
	const requests = 100
	errs := make([]error, requests)
	Parallel(requests, func(i int) { _, errs[i] = s.Version(context.Background()) })
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := dialled.Load(); n > workers {
		t.Errorf("%d requests by %d workers opened %d connections, want at most %d", requests, workers, n, workers)
	}
}
