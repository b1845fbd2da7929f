package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

func TestContextFor(t *testing.T) {
	raw := clientcmdapi.Config{
		CurrentContext: "hub",
		Clusters: map[string]*clientcmdapi.Cluster{
			"hub":    {Server: "https://hub.example:6443"},
			"prod":   {Server: "https://prod.example:6443/"},
			"stage":  {Server: "https://stage.example:6443"},
			"stage2": {Server: "https://STAGE.example:6443"},
		},
		Contexts: map[string]*clientcmdapi.Context{
			"hub":          {Cluster: "hub"},
			"prod-oncall":  {Cluster: "prod"},
			"stage-a":      {Cluster: "stage"},
			"stage-b":      {Cluster: "stage2"},
			"prod-cluster": {Cluster: "prod"},
		},
	}
	tests := []struct {
		name, server, clusterName string
		current                   string
		want, wantErr             string
	}{
		{name: "by server, trailing slash ignored", server: "https://prod.example:6443", current: "hub", wantErr: "several kubeconfig contexts reach https://prod.example:6443 (prod-cluster, prod-oncall)"},
		{name: "several, the current one wins", server: "https://prod.example:6443", current: "prod-oncall", want: "prod-oncall"},
		{name: "host case ignored", server: "https://stage.example:6443", current: "hub", wantErr: "(stage-a, stage-b)"},
		{name: "one match", server: "https://hub.example:6443/", current: "hub", want: "hub"},
		{name: "none", server: "https://dr.example:6443", current: "hub", wantErr: "no kubeconfig context reaches https://dr.example:6443: pass --target-context"},
		{name: "by name", clusterName: "stage-a", current: "hub", want: "stage-a"},
		{name: "name unknown", clusterName: "dr", current: "hub", wantErr: `no kubeconfig context is named "dr"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw.CurrentContext = tt.current
			got, err := contextFor(raw, tt.server, tt.clusterName)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestAuditLogStaysInItsNamespace: with apps in any namespace, the audit
// log must not follow --app-namespace into a namespace app teams control.
func TestAuditLogStaysInItsNamespace(t *testing.T) {
	f := &engineFlags{Factory: NewFactory(genericiooptions.IOStreams{})}
	cmd := &cobra.Command{}
	f.addAppNamespace(cmd)
	f.addEngineFlags(cmd)
	if err := cmd.ParseFlags([]string{"--app-namespace", "team-a"}); err != nil {
		t.Fatal(err)
	}
	f.configFlags.KubeConfig = oneClusterKubeconfig(t)
	e, err := f.engine()
	if err != nil {
		t.Fatal(err)
	}
	store, ok := e.Audit.(*audit.ConfigMapStore)
	if !ok || store.Namespace != "argocd" || e.AppNamespace != "team-a" {
		t.Errorf("audit log in %+v for applications in %s; want argocd", e.Audit, e.AppNamespace)
	}
}

// oneClusterKubeconfig writes a kubeconfig with one context, for a cluster
// that is never reached, and returns its path.
func oneClusterKubeconfig(t *testing.T) *string {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://127.0.0.1:1}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &kubeconfig
}

// TestClientsAreNotThrottledToClientGoDefaults: client-go's default limit
// (5 requests a second after 10) held the emergency patch of a break-glass
// 200 ms behind the requests before it. The Argo CD cluster's client and a
// destination cluster's get kubectl's limit.
func TestClientsAreNotThrottledToClientGoDefaults(t *testing.T) {
	f := &engineFlags{Factory: NewFactory(genericiooptions.IOStreams{})}
	f.configFlags.KubeConfig = oneClusterKubeconfig(t)
	e, err := f.engine()
	if err != nil {
		t.Fatal(err)
	}
	dest, err := kubeconfigClusters{flags: f.configFlags}.Destination("https://127.0.0.1:1", "", "")
	if err != nil {
		t.Fatal(err)
	}
	for name, kube := range map[string]kubernetes.Interface{"argo cd cluster": e.Kube, "destination": dest.Kube} {
		if qps := kube.CoreV1().RESTClient().GetRateLimiter().QPS(); qps != 50 {
			t.Errorf("%s: client limited to %v requests a second, want kubectl's 50", name, qps)
		}
	}
}

func TestTargetContextMustReachTheDestination(t *testing.T) {
	raw := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"prod": {Server: "https://prod.example:6443/"}, "stage": {Server: "https://stage.example:6443"}},
		Contexts: map[string]*clientcmdapi.Context{"prod": {Cluster: "prod"}, "stage": {Cluster: "stage"}, "broken": {Cluster: "gone"}},
	}
	if err := reaches(raw, "prod", "https://PROD.example:6443"); err != nil {
		t.Errorf("the destination's own context: %v", err)
	}
	if err := reaches(raw, "stage", "https://prod.example:6443"); err == nil || !strings.Contains(err.Error(), `--target-context "stage" reaches https://stage.example:6443, not the application's destination https://prod.example:6443`) {
		t.Errorf("another cluster's context: %v", err)
	}
	if err := reaches(raw, "broken", "https://prod.example:6443"); err == nil || !strings.Contains(err.Error(), "does not define") {
		t.Errorf("a context without its cluster: %v", err)
	}
	if err := reaches(raw, "nope", "https://prod.example:6443"); err == nil || !strings.Contains(err.Error(), "is not a context of your kubeconfig") {
		t.Errorf("an unknown context: %v", err)
	}
}
