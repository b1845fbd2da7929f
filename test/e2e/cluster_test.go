//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// hubAndSpokeKubeconfig writes a kubeconfig whose current context "hub"
// reaches the API server as https://localhost:PORT, and whose contexts
// "spoke-oncall" and "spoke-nobody" reach it as spoke, the URL Argo CD
// knows the destination cluster by, as oncall and as nobody.
func hubAndSpokeKubeconfig(t *testing.T, spoke string) string {
	t.Helper()
	load := func(user string) *clientcmdapi.Config {
		c, err := clientcmd.LoadFromFile(testEnv.Kubeconfig(user))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	oncall, nobody := load(env.Oncall.Name), load(env.Nobody.Name)
	ca := oncall.Clusters[env.ContextName].CertificateAuthorityData
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hub"] = &clientcmdapi.Cluster{Server: strings.Replace(spoke, "127.0.0.1", "localhost", 1), CertificateAuthorityData: ca}
	cfg.Clusters["spoke"] = &clientcmdapi.Cluster{Server: spoke, CertificateAuthorityData: ca}
	cfg.AuthInfos["oncall"] = oncall.AuthInfos[env.Oncall.Name]
	cfg.AuthInfos["nobody"] = nobody.AuthInfos[env.Nobody.Name]
	cfg.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "oncall"}
	cfg.Contexts["spoke-oncall"] = &clientcmdapi.Context{Cluster: "spoke", AuthInfo: "oncall"}
	cfg.Contexts["spoke-nobody"] = &clientcmdapi.Context{Cluster: "spoke", AuthInfo: "nobody"}
	cfg.CurrentContext = "hub"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBreakglassOnAnotherDestinationCluster(t *testing.T) {
	core(t)
	ctx := context.Background()
	spoke, err := environment(t).RegisterCluster(ctx, "spoke")
	if err != nil {
		t.Fatal(err)
	}
	deployAppTo(t, "bg-spoke", spoke)
	u := newUser(t, env.Oncall.Name)
	u.env = append(u.env, "KUBECONFIG="+hubAndSpokeKubeconfig(t, spoke))
	args := []string{"breakglass", "bg-spoke", "deployment/web", "--replicas", "4", "--reason", "spoke load", "-y"}

	_, errOut := mustRun(t, u, 1, args...)
	if !strings.Contains(errOut, "several kubeconfig contexts reach "+spoke+" (spoke-nobody, spoke-oncall): pass --target-context") {
		t.Errorf("two contexts reach the destination: %q", errOut)
	}
	// The target's rights are checked in the destination cluster, as the
	// context's user: nobody may not patch there, although the hub's
	// oncall may.
	_, errOut = mustRun(t, u, 1, append(args, "--target-context", "spoke-nobody")...)
	if !strings.Contains(errOut, "you may not patch deployments.apps bg-spoke/web") {
		t.Errorf("--target-context spoke-nobody: %q", errOut)
	}
	_, errOut = mustRun(t, u, 1, append(args, "--target-context", "dr")...)
	if !strings.Contains(errOut, `--target-context "dr" is not a context of your kubeconfig (contexts: hub, spoke-nobody, spoke-oncall)`) {
		t.Errorf("--target-context dr: %q", errOut)
	}
	// The hub context reaches the same API server under another name: it is
	// not the destination the record would name, so it is refused.
	_, errOut = mustRun(t, u, 1, append(args, "--target-context", "hub")...)
	if !strings.Contains(errOut, `--target-context "hub" reaches `+strings.Replace(spoke, "127.0.0.1", "localhost", 1)+`, not the application's destination `+spoke) {
		t.Errorf("--target-context hub: %q", errOut)
	}

	out, _ := mustRun(t, u, 0, append(args, "--target-context", "spoke-oncall")...)
	if !strings.Contains(out, "Cluster:     "+spoke+" (kubeconfig context spoke-oncall)") {
		t.Errorf("the plan does not name the destination cluster and context:\n%s", out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if n := replicasIn(ctx, t, "bg-spoke"); n != 4 {
			t.Fatalf("replicas %d: the patch did not land or self-heal reverted it", n)
		}
		time.Sleep(500 * time.Millisecond)
	}
	var patched *audit.Record
	for _, r := range allRecords(t) {
		if r.Application != nil && r.Application.Name == "bg-spoke" && r.Event == audit.EventPatched {
			patched = r
		}
	}
	if patched == nil || patched.Cluster == nil || patched.Cluster.Server != spoke {
		t.Errorf("the patched record does not name the destination cluster %s: %+v", spoke, patched)
	}
}
