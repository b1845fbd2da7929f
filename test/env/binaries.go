package env

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Binaries are the executables the environment runs.
type Binaries struct {
	Etcd, KubeAPIServer, ArgoCD, Redis string
}

var (
	binariesOnce sync.Once
	binaries     Binaries
	binariesErr  error
)

// RepoRoot is the root of this repository, found from this source file.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// FindBinaries locates the environment's executables: envtest's
// TEST_ASSET_ETCD and TEST_ASSET_KUBE_APISERVER and our TEST_ASSET_ARGOCD when
// set, else the pinned builds of hack/tools (built into the cache on first
// use); redis-server from PATH.
func FindBinaries() (Binaries, error) {
	binariesOnce.Do(func() { binaries, binariesErr = findBinaries() })
	return binaries, binariesErr
}

func findBinaries() (Binaries, error) {
	var b Binaries
	b.Etcd, b.KubeAPIServer, b.ArgoCD = os.Getenv("TEST_ASSET_ETCD"), os.Getenv("TEST_ASSET_KUBE_APISERVER"), os.Getenv("TEST_ASSET_ARGOCD")
	if b.Etcd == "" || b.KubeAPIServer == "" {
		dir, err := buildTools("kube", "etcd=go.etcd.io/etcd/server/v3", "kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver")
		if err != nil {
			return b, err
		}
		if b.Etcd == "" {
			b.Etcd = filepath.Join(dir, "etcd")
		}
		if b.KubeAPIServer == "" {
			b.KubeAPIServer = filepath.Join(dir, "kube-apiserver")
		}
	}
	if b.ArgoCD == "" {
		dir, err := buildTools("argocd", "argocd=github.com/argoproj/argo-cd/v2/cmd")
		if err != nil {
			return b, err
		}
		b.ArgoCD = filepath.Join(dir, "argocd")
	}
	redis, err := exec.LookPath("redis-server")
	if err != nil {
		return b, fmt.Errorf("redis-server not found on PATH: install it (apt-get install redis-server)")
	}
	b.Redis = redis
	return b, nil
}

// buildTools runs hack/tools/build.sh, which builds only what its cache lacks.
func buildTools(module string, specs ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := exec.Command(filepath.Join(RepoRoot(), "hack", "tools", "build.sh"), append([]string{module}, specs...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building test tools %s: %v\n%s", module, err, errOut.String())
	}
	return strings.TrimSpace(out.String()), nil
}
