//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// TestKrewInstallFromLocalArchive packages the plugin the way a release
// does, checks the archive's SBOM and checksums, validates the manifest
// with krew's own validator, installs it with krew into a temporary
// KREW_ROOT without any network, and runs it through kubectl's plugin
// discovery.
func TestKrewInstallFromLocalArchive(t *testing.T) {
	suite(t)
	dir := t.TempDir()
	dist, manifest := filepath.Join(dir, "dist"), filepath.Join(dir, "gitops.yaml")
	platform := runtime.GOOS + "/" + runtime.GOARCH
	sbomTool, err := exec.Command(filepath.Join(env.RepoRoot(), "hack", "tools", "build.sh"), "image",
		"cyclonedx-gomod=github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod").Output()
	if err != nil {
		t.Fatalf("building cyclonedx-gomod: %v", err)
	}
	gen := exec.Command("go", "run", "./krew", "-version", testVersion, "-dist", dist, "-out", manifest, "-platforms", platform,
		"-ldflags", "-X github.com/kubectl-gitops/kubectl-gitops/plugin.version="+testVersion,
		"-cyclonedx-gomod", filepath.Join(strings.TrimSpace(string(sbomTool)), "cyclonedx-gomod"))
	gen.Dir = env.RepoRoot()
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("rendering the krew manifest: %v\n%s", err, out)
	}
	release := "kubectl-gitops_" + testVersion + "_" + runtime.GOOS + "_" + runtime.GOARCH
	sbom, err := os.ReadFile(filepath.Join(dist, release+".cdx.json"))
	if err != nil {
		t.Fatalf("the archive's SBOM: %v", err)
	}
	assertSBOMListsModules(t, sbom, runtime.GOOS, runtime.GOARCH)
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(sbom)
	if !strings.Contains(string(sums), hex.EncodeToString(sum[:])+"  "+release+".cdx.json\n") {
		t.Errorf("SHA256SUMS does not list the SBOM's digest:\n%s", sums)
	}
	tools, err := exec.Command(filepath.Join(env.RepoRoot(), "hack", "tools", "build.sh"), "krew",
		"krew=sigs.k8s.io/krew/cmd/krew", "validate-krew-manifest=sigs.k8s.io/krew/cmd/validate-krew-manifest").Output()
	if err != nil {
		t.Fatalf("building krew: %v", err)
	}
	toolDir := strings.TrimSpace(string(tools))
	if out, err := exec.Command(filepath.Join(toolDir, "validate-krew-manifest"), "-manifest", manifest, "-skip-install").CombinedOutput(); err != nil {
		t.Fatalf("validate-krew-manifest: %v\n%s", err, out)
	}

	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(toolDir, "krew"), filepath.Join(bin, "kubectl-krew")); err != nil {
		t.Fatal(err)
	}
	krewRoot := filepath.Join(dir, "krew")
	u := &user{t: t, env: []string{
		"HOME=" + t.TempDir(),
		"KREW_ROOT=" + krewRoot,
		// Only krew's bin and kubectl-krew: the plugin must come from krew.
		"PATH=" + filepath.Join(krewRoot, "bin") + string(os.PathListSeparator) + bin + string(os.PathListSeparator) + "/usr/local/bin:/usr/bin:/bin",
		"KUBECONFIG=" + testEnv.Kubeconfig(env.Auditor.Name),
	}}
	// A local index (a Git repository holding plugins/gitops.yaml) stands in
	// for krew-index, which would need the network.
	index := filepath.Join(krewRoot, "index", "default")
	if err := os.MkdirAll(filepath.Join(index, "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(index, "plugins", "gitops.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=e2e", "-c", "user.email=e2e@example.invalid", "commit", "-qm", "index"}} {
		if out, err := exec.Command("git", append([]string{"-C", index}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	archive := filepath.Join(dist, release+".tar.gz")
	u.kubectl("krew", "install", "--manifest="+manifest, "--archive="+archive)

	if list := u.kubectl("plugin", "list"); !strings.Contains(list, filepath.Join(krewRoot, "bin", "kubectl-gitops")) {
		t.Errorf("kubectl plugin list does not show the krew-installed plugin:\n%s", list)
	}
	if out := u.kubectl("gitops", "version", "--client"); !strings.Contains(out, testVersion) {
		t.Errorf("kubectl gitops version --client after krew install: %q", out)
	}
	if out := u.kubectl("krew", "list"); !strings.Contains(out, "gitops") {
		t.Errorf("kubectl krew list does not show gitops: %q", out)
	}
	completions, _ := filepath.Glob(filepath.Join(krewRoot, "store", "gitops", "*", "kubectl_complete-gitops"))
	if len(completions) != 1 {
		t.Errorf("the completion script was not installed beside the plugin: %v", completions)
	}
	u.kubectl("krew", "uninstall", "gitops")
	if _, err := os.Lstat(filepath.Join(krewRoot, "bin", "kubectl-gitops")); !os.IsNotExist(err) {
		t.Errorf("kubectl-gitops still installed after uninstall: %v", err)
	}
}
