// Package breakglass is the engine of kubectl gitops: it plans, pauses,
// patches, checks catch-up and restores, and is the only package that knows
// how Argo CD behaves. It never prints and never reads flags: callers pass
// plain values and interfaces and get results back.
package breakglass

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ArgoServer addresses the Argo CD API server the way the argocd CLI does:
// ARGOCD_SERVER (host:port), ARGOCD_AUTH_TOKEN, and --plaintext/--insecure in
// ARGOCD_OPTS.
type ArgoServer struct {
	Addr      string
	Token     string
	Plaintext bool
	Insecure  bool
}

// ArgoServerFromEnv reads the argocd CLI's environment variables; ok is false
// when ARGOCD_SERVER is unset.
func ArgoServerFromEnv() (s ArgoServer, ok bool) {
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

// URL returns the base URL of the server's REST gateway.
func (s ArgoServer) URL() string {
	if strings.HasPrefix(s.Addr, "http://") || strings.HasPrefix(s.Addr, "https://") {
		return strings.TrimSuffix(s.Addr, "/")
	}
	if s.Plaintext {
		return "http://" + s.Addr
	}
	return "https://" + s.Addr
}

func (s ArgoServer) client() *http.Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if s.Insecure {
		transport.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the user asked for --insecure
	}
	return &http.Client{Transport: transport, Timeout: 15 * time.Second}
}

// get fetches path from the API server and decodes the JSON answer into out.
func (s ArgoServer) get(ctx context.Context, path string, out any) error {
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
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("argo cd api server %s answered %s for %s", s.Addr, resp.Status, path)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// Version asks the Argo CD API server for its version.
func (s ArgoServer) Version(ctx context.Context) (string, error) {
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

// ArgoVersionFromWorkloads reads the Argo CD version from the image tag of the
// Argo CD server or application controller running in namespace, for when the
// API server is not configured. It returns "" when neither is found.
func ArgoVersionFromWorkloads(ctx context.Context, kube kubernetes.Interface, namespace string) (string, error) {
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
