package argocd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// Server addresses the Argo CD API server the way the argocd CLI does:
// ARGOCD_SERVER (host:port), ARGOCD_AUTH_TOKEN, and --plaintext/--insecure in
// ARGOCD_OPTS.
type Server struct {
	Addr      string
	Token     string
	Plaintext bool
	Insecure  bool
}

// ServerFromEnv reads the argocd CLI's environment variables; ok is false
// when ARGOCD_SERVER is unset.
func ServerFromEnv() (s Server, ok bool) {
	s.Addr = os.Getenv("ARGOCD_SERVER")
	if s.Addr == "" {
		return s, false
	}
	s.Token = os.Getenv("ARGOCD_AUTH_TOKEN")
	for _, opt := range strings.Fields(os.Getenv("ARGOCD_OPTS")) {
		switch opt {
		case "--plaintext":
			s.Plaintext = true
		case "--insecure":
			s.Insecure = true
		}
	}
	return s, true
}

// argocdConfig is the part of the argocd CLI's configuration file (written
// by `argocd login`) that names a server and its credentials.
type argocdConfig struct {
	CurrentContext string `json:"current-context"`
	Contexts       []struct {
		Name   string `json:"name"`
		Server string `json:"server"`
		User   string `json:"user"`
	} `json:"contexts"`
	Servers []struct {
		Server    string `json:"server"`
		Insecure  bool   `json:"insecure"`
		PlainText bool   `json:"plain-text"`
	} `json:"servers"`
	Users []struct {
		Name      string `json:"name"`
		AuthToken string `json:"auth-token"`
	} `json:"users"`
}

// ConfigPath is where the argocd CLI keeps its configuration, found as
// the CLI finds it: ARGOCD_CONFIG_DIR, the legacy ~/.argocd, then
// $XDG_CONFIG_HOME/argocd or ~/.config/argocd.
func ConfigPath() string {
	if dir := os.Getenv("ARGOCD_CONFIG_DIR"); dir != "" {
		return filepath.Join(dir, "config")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	if _, err := os.Stat(filepath.Join(home, ".argocd")); err == nil {
		return filepath.Join(home, ".argocd", "config")
	}
	if xdg := os.Getenv("XDG_CONFIG_HOME"); xdg != "" {
		return filepath.Join(xdg, "argocd", "config")
	}
	return filepath.Join(home, ".config", "argocd", "config")
}

// ServerFromConfig reads the server, token and plaintext/insecure
// options of a context of the argocd CLI's configuration (the current one
// when name is ""), so that anyone who ran `argocd login` needs nothing
// more. ok is false when there is no configuration; a named context that is
// not there is an error.
func ServerFromConfig(path, name string) (Server, bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && name == "" {
		return Server{}, false, nil
	}
	if err != nil {
		return Server{}, false, fmt.Errorf("reading the argocd CLI's configuration: %w", err)
	}
	var cfg argocdConfig
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return Server{}, false, fmt.Errorf("the argocd CLI's configuration %s is unreadable: %w", path, err)
	}
	if name == "" {
		name = cfg.CurrentContext
	}
	var known []string
	for _, c := range cfg.Contexts {
		known = append(known, c.Name)
		if c.Name != name {
			continue
		}
		s := Server{Addr: c.Server}
		for _, srv := range cfg.Servers {
			if srv.Server == c.Server {
				s.Plaintext, s.Insecure = srv.PlainText, srv.Insecure
			}
		}
		for _, u := range cfg.Users {
			if u.Name == c.User {
				s.Token = u.AuthToken
			}
		}
		return s, true, nil
	}
	if name == "" {
		return Server{}, false, nil
	}
	return Server{}, false, Invalid(InputArgoContext, name, "not a context of %s (contexts: %s)", path, strings.Join(known, ", "))
}

// URL returns the base URL of the server's REST gateway.
func (s Server) URL() string {
	if strings.HasPrefix(s.Addr, "http://") || strings.HasPrefix(s.Addr, "https://") {
		return strings.TrimSuffix(s.Addr, "/")
	}
	if s.Plaintext {
		return "http://" + s.Addr
	}
	return "https://" + s.Addr
}

// The API server's HTTP clients, one per TLS setting, are shared by every
// Server: a command about a thousand Applications then reuses its
// connections (and TLS sessions) instead of dialling and handshaking for
// each request.
var (
	verifyingClient = sync.OnceValue(func() *http.Client { return newClient(false) })
	insecureClient  = sync.OnceValue(func() *http.Client { return newClient(true) })
)

func newClient(insecure bool) *http.Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// Parallel's workers each keep a connection, and no more: the default
	// of two idle connections per host would close the others after every
	// request, and a request that starts before its worker's connection
	// is back in the pool would dial another.
	transport.MaxConnsPerHost, transport.MaxIdleConnsPerHost = workers, workers
	if insecure {
		transport.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the user asked for --insecure
	}
	return &http.Client{Transport: transport, Timeout: 15 * time.Second}
}

func (s Server) client() *http.Client {
	if s.Insecure {
		return insecureClient()
	}
	return verifyingClient()
}

// get fetches path from the API server and decodes the JSON answer into out.
func (s Server) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+path, nil)
	if err != nil {
		return err
	}
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	resp, err := s.client().Do(req)
	if err != nil {
		return fmt.Errorf("argo cd api server %s: %w", s.Addr, err)
	}
	defer func() {
		// Read to the end, or the connection is closed rather than reused.
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("argo cd api server %s answered %s for %s", s.Addr, resp.Status, path)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// Version asks the Argo CD API server for its version.
func (s Server) Version(ctx context.Context) (string, error) {
	var v struct {
		Version string `json:"Version"`
	}
	if err := s.get(ctx, "/api/version", &v); err != nil {
		return "", err
	}
	if v.Version == "" {
		return "", fmt.Errorf("argo cd api server %s did not report a version", s.Addr)
	}
	return v.Version, nil
}

// VersionFromWorkloads reads the Argo CD version from the image tag of the
// Argo CD server or application controller running in namespace, for when the
// API server is not configured. It returns "" when neither is found.
func VersionFromWorkloads(ctx context.Context, kube kubernetes.Interface, namespace string) (string, error) {
	for _, name := range []string{"argocd-server", "argocd-application-controller"} {
		selector := metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + name}
		deps, err := kube.AppsV1().Deployments(namespace).List(ctx, selector)
		if err != nil {
			return "", err
		}
		sets, err := kube.AppsV1().StatefulSets(namespace).List(ctx, selector)
		if err != nil {
			return "", err
		}
		var specs []corev1.PodSpec
		for _, d := range deps.Items {
			specs = append(specs, d.Spec.Template.Spec)
		}
		for _, s := range sets.Items {
			specs = append(specs, s.Spec.Template.Spec)
		}
		for _, spec := range specs {
			for _, c := range spec.Containers {
				if i := strings.LastIndex(c.Image, ":"); i > 0 && !strings.Contains(c.Image[i:], "/") {
					return c.Image[i+1:], nil
				}
			}
		}
	}
	return "", nil
}

// Manifests asks the Argo CD API server for the Application's target state
// where Git stands: the objects Git renders to, as Argo CD would apply them.
// Several sources are rendered each at its revision; a source-hydrator
// Application's dry source at the dry commit (the API renders that one).
func (s Server) Manifests(ctx context.Context, appNamespace, app string, at audit.Git) ([]map[string]any, error) {
	var resp struct {
		Manifests []string `json:"manifests"`
	}
	query := url.Values{"appNamespace": {appNamespace}}
	if len(at.Revisions) > 0 {
		for i, r := range at.Revisions {
			query.Add("sourcePositions", strconv.Itoa(i+1))
			query.Add("revisions", r)
		}
	} else {
		query.Set("revision", at.Revision)
	}
	path := "/api/v1/applications/" + url.PathEscape(app) + "/manifests?" + query.Encode()
	if err := s.get(ctx, path, &resp); err != nil {
		return nil, err
	}
	out := make([]map[string]any, 0, len(resp.Manifests))
	for _, m := range resp.Manifests {
		var obj map[string]any
		if err := json.Unmarshal([]byte(m), &obj); err != nil {
			return nil, fmt.Errorf("argo cd returned a manifest that is not JSON: %w", err)
		}
		out = append(out, obj)
	}
	return out, nil
}

// ResourceDiff is one entry of Argo CD's managed-resources answer.
type ResourceDiff struct {
	Group, Kind, Namespace, Name string
	TargetState                  string `json:"targetState"`
	NormalizedLiveState          string `json:"normalizedLiveState"`
	PredictedLiveState           string `json:"predictedLiveState"`
	Modified                     bool   `json:"modified"`
	Hook                         bool   `json:"hook"`
}

// Deleted is whether Git has the resource and the cluster does not.
func (d ResourceDiff) Deleted() bool {
	return d.NormalizedLiveState == "" || d.NormalizedLiveState == "null"
}

// ManagedResources asks the Argo CD API for the Application's resources
// that differ from Git, as its own diff sees them.
func (s Server) ManagedResources(ctx context.Context, app audit.AppRef) ([]ResourceDiff, error) {
	var resp struct {
		Items []ResourceDiff `json:"items"`
	}
	path := "/api/v1/applications/" + url.PathEscape(app.Name) + "/managed-resources?appNamespace=" + url.QueryEscape(app.Namespace)
	if err := s.get(ctx, path, &resp); err != nil {
		return nil, err
	}
	var out []ResourceDiff
	for _, d := range resp.Items {
		if d.Modified && !d.Hook && d.TargetState != "" && d.TargetState != "null" {
			out = append(out, d)
		}
	}
	return out, nil
}
