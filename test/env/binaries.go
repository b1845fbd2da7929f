package env

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Binaries are the executables the environment runs.
type Binaries struct {
	Etcd, KubeAPIServer, ArgoCD, Redis string
	// Renderers is the directory of the helm and kustomize the
	// repo-server runs for Helm and kustomize sources (its image bundles
	// them; hack/tools/render pins the versions Argo CD 3.6 does).
	Renderers string
	// Kube is the Kubernetes release KubeAPIServer was built from.
	Kube KubeRelease
	// Argo is the Argo CD release ArgoCD was built from.
	Argo ArgoRelease
}

// RepoRoot is the root of this repository, found from this source file.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// KubeRelease is a Kubernetes release whose kube-apiserver the
// environment can run: the tool module of hack/tools that pins it. etcd
// always comes from module kube.
type KubeRelease struct {
	Version, Tools string
}

// KubeReleases are the Kubernetes releases the admission policies are
// proven on; the first is the default, which the whole suite runs on. The
// others are the oldest release README claims (1.30, where
// ValidatingAdmissionPolicy is GA) and the newest that builds here; the
// tests that need only the API server run on them (E2E_API_ONLY).
var KubeReleases = []KubeRelease{
	{Version: "1.35.4", Tools: "kube"},
	{Version: "1.30.14", Tools: "kube130"},
	{Version: "1.37.2", Tools: "kube137"},
}

// KubeReleaseFor returns the release KUBE_VERSION names, by its version
// or its minor (1.30), the default when it is unset.
func KubeReleaseFor(version string) (KubeRelease, error) {
	if version == "" {
		return KubeReleases[0], nil
	}
	version = strings.TrimPrefix(version, "v")
	var known []string
	for _, r := range KubeReleases {
		if r.Version == version || strings.HasPrefix(r.Version, version+".") {
			return r, nil
		}
		known = append(known, r.Version)
	}
	return KubeRelease{}, fmt.Errorf("KUBE_VERSION=%s: the test environment runs Kubernetes %s", version, strings.Join(known, ", "))
}

// ArgoRelease is an Argo CD release the environment can run: the tool
// module of hack/tools that pins it and the Go module whose manifests hold
// its CRDs.
type ArgoRelease struct {
	Version string
	// Tools is the hack/tools module, Cmd the package of its binary.
	Tools, Cmd string
	// Module is the Argo CD Go module at Version.
	Module, ModuleVersion string
}

// Major is the release's major version.
func (r ArgoRelease) Major() int {
	if strings.HasPrefix(r.Version, "2.") {
		return 2
	}
	return 3
}

// ArgoReleases are the Argo CD releases the suite is proven on; the first
// is the default.
var ArgoReleases = []ArgoRelease{
	{Version: "3.6.1", Tools: "argocd3", Cmd: "github.com/argoproj/argo-cd/v3/cmd", Module: "github.com/argoproj/argo-cd/v3", ModuleVersion: "v3.6.1"},
	{Version: "2.14.21", Tools: "argocd", Cmd: "github.com/argoproj/argo-cd/v2/cmd", Module: "github.com/argoproj/argo-cd/v2", ModuleVersion: "v2.14.21"},
}

// ArgoReleaseFor returns the release ARGOCD_VERSION names, the default
// (the current release) when it is unset.
func ArgoReleaseFor(version string) (ArgoRelease, error) {
	if version == "" {
		return ArgoReleases[0], nil
	}
	var known []string
	for _, r := range ArgoReleases {
		if r.Version == strings.TrimPrefix(version, "v") {
			return r, nil
		}
		known = append(known, r.Version)
	}
	return ArgoRelease{}, fmt.Errorf("ARGOCD_VERSION=%s: the test environment runs Argo CD %s", version, strings.Join(known, " or "))
}

// FindBinaries locates the environment's executables: envtest's
// TEST_ASSET_ETCD and TEST_ASSET_KUBE_APISERVER and our TEST_ASSET_ARGOCD when
// set, else the pinned builds of hack/tools (built into the cache on first
// use) for the Kubernetes release KUBE_VERSION names and the Argo CD release
// ARGOCD_VERSION names (none with argo false); redis-server from PATH.
func FindBinaries(argo bool) (Binaries, error) {
	var b Binaries
	kube, err := KubeReleaseFor(os.Getenv("KUBE_VERSION"))
	if err != nil {
		return b, err
	}
	release, err := ArgoReleaseFor(os.Getenv("ARGOCD_VERSION"))
	if err != nil {
		return b, err
	}
	b.Kube, b.Argo = kube, release
	b.Etcd, b.KubeAPIServer, b.ArgoCD = os.Getenv("TEST_ASSET_ETCD"), os.Getenv("TEST_ASSET_KUBE_APISERVER"), os.Getenv("TEST_ASSET_ARGOCD")
	if b.Etcd == "" {
		dir, err := buildTools("kube", "etcd=go.etcd.io/etcd/server/v3")
		if err != nil {
			return b, err
		}
		b.Etcd = filepath.Join(dir, "etcd")
	}
	if b.KubeAPIServer == "" {
		dir, err := buildTools(kube.Tools, "kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver")
		if err != nil {
			return b, err
		}
		b.KubeAPIServer = filepath.Join(dir, "kube-apiserver")
	}
	if !argo {
		return b, nil
	}
	if b.ArgoCD == "" {
		dir, err := buildTools(release.Tools, "argocd="+release.Cmd)
		if err != nil {
			return b, err
		}
		b.ArgoCD = filepath.Join(dir, "argocd")
	}
	if b.Renderers, err = buildTools("render", "helm=helm.sh/helm/v4/cmd/helm", "kustomize=sigs.k8s.io/kustomize/kustomize/v5"); err != nil {
		return b, err
	}
	redis, err := exec.LookPath("redis-server")
	if err != nil {
		return b, fmt.Errorf("redis-server not found on PATH: install it (apt-get install redis-server)")
	}
	b.Redis = redis
	return b, nil
}

// moduleDir is where the Go module cache holds r's Argo CD module (the
// build of its tool module downloaded it).
func (r ArgoRelease) moduleDir() (string, error) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("locating the Go module cache: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), r.Module+"@"+r.ModuleVersion)
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("the Argo CD %s module is not in the module cache (hack/tools/build.sh %s downloads it): %w", r.Version, r.Tools, err)
	}
	return dir, nil
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
