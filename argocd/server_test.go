package argocd

import (
	"os"
	"path/filepath"
	"strings"
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
