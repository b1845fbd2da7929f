//go:build e2e

package e2e

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

const modulePath = "github.com/kubectl-gitops/kubectl-gitops"

// TestGoInstallAtVersion installs the plugin as the README says a user
// can, `go install …/cmd/kubectl-gitops@VERSION`, from a module proxy that
// serves this checkout as a v0.0.0-e2e version in front of the real one (for the
// dependencies). go install refuses a module whose go.mod has replace
// directives, so this fails the day one comes back.
func TestGoInstallAtVersion(t *testing.T) {
	suite(t)
	// A version of its own each run: the module cache keeps what it once
	// downloaded, and would answer for the checkout of an earlier run.
	version := fmt.Sprintf("v0.0.0-e2e.%d", time.Now().UnixNano())
	t.Cleanup(func() { forgetModuleVersion(t, version) })
	proxy := t.TempDir()
	serveCheckout(t, proxy, version)
	upstream, err := exec.Command("go", "env", "GOPROXY").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	install := exec.Command("go", "install", modulePath+"/cmd/kubectl-gitops@"+version)
	install.Dir = t.TempDir() // outside any module, as a user's shell
	install.Env = append(os.Environ(), "GOBIN="+bin, "GOFLAGS=", "GONOSUMDB="+modulePath,
		"GOPROXY=file://"+filepath.ToSlash(proxy)+","+strings.TrimSpace(string(upstream)))
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install %s/cmd/kubectl-gitops@%s: %v\n%s", modulePath, version, err, out)
	}
	out, err := exec.Command(filepath.Join(bin, "kubectl-gitops"), "version", "--client").CombinedOutput()
	if err != nil || !strings.Contains(string(out), version) {
		t.Errorf("the installed plugin's version: %v\n%s", err, out)
	}
}

// forgetModuleVersion removes version of this module from the module cache
// (read-only there, as go writes it).
func forgetModuleVersion(t *testing.T, version string) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Log(err)
		return
	}
	cache := strings.TrimSpace(string(out))
	extracted := filepath.Join(cache, filepath.FromSlash(modulePath)+"@"+version)
	_ = filepath.Walk(extracted, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	_ = os.RemoveAll(extracted)
	download := filepath.Join(cache, "cache", "download", filepath.FromSlash(modulePath), "@v")
	matches, _ := filepath.Glob(filepath.Join(download, version+".*"))
	for _, m := range matches {
		_ = os.Remove(m)
	}
}

// serveCheckout writes a GOPROXY directory (the module proxy protocol)
// holding the repository's tracked files as module version.
func serveCheckout(t *testing.T, proxy, version string) {
	root := env.RepoRoot()
	files, err := exec.Command("git", "-C", root, "ls-files").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(proxy, filepath.FromSlash(modulePath), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	zf, err := os.Create(filepath.Join(dir, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer zf.Close()
	zw := zip.NewWriter(zf)
	nested := nestedModules(strings.Fields(string(files)))
	for _, name := range strings.Fields(string(files)) {
		if nested(name) {
			continue // a directory with its own go.mod is not part of this module
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.Create(modulePath + "@" + version + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(map[string]string{"Version": version, "Time": time.Now().UTC().Format(time.RFC3339)})
	for name, data := range map[string][]byte{"list": []byte(version + "\n"), version + ".mod": gomod, version + ".info": info} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// nestedModules reports whether a tracked file belongs to a module nested
// in the repository (hack/tools/*).
func nestedModules(files []string) func(string) bool {
	var dirs []string
	for _, f := range files {
		if path.Base(f) == "go.mod" && f != "go.mod" {
			dirs = append(dirs, path.Dir(f)+"/")
		}
	}
	return func(name string) bool {
		for _, d := range dirs {
			if strings.HasPrefix(name, d) {
				return true
			}
		}
		return false
	}
}
