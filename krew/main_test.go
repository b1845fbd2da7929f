package main

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestManifestSaysWhatToDoAfterInstalling: the manifest's caveats carry
// the post-install steps (the cluster's roles and policies, the digest
// key, linking the completion shim without a version directory), and each
// platform installs the shim that runs there: the sh script had no
// Windows counterpart.
func TestManifestSaysWhatToDoAfterInstalling(t *testing.T) {
	platforms := []Platform{
		{OS: "linux", Arch: "amd64", Bin: "kubectl-gitops", Complete: completionShim("linux")},
		{OS: "windows", Arch: "amd64", Bin: "kubectl-gitops.exe", Complete: completionShim("windows")},
	}
	out, err := render("gitops.yaml.tmpl", "v1.2.3", platforms)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Spec struct {
			Caveats   string
			Platforms []struct {
				Selector struct{ MatchLabels map[string]string } `json:"selector"`
				Files    []struct{ From string }
			}
		}
	}
	if err := yaml.Unmarshal(out, &m); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"kubectl apply -k deploy/", "kubectl-gitops-digest-key", `"${KREW_ROOT:-$HOME/.krew}"/store/gitops/*/kubectl_complete-gitops`, "kubectl_complete-gitops.cmd"} {
		if !strings.Contains(m.Spec.Caveats, want) {
			t.Errorf("caveats lack %q:\n%s", want, m.Spec.Caveats)
		}
	}
	for _, p := range m.Spec.Platforms {
		var files []string
		for _, f := range p.Files {
			files = append(files, f.From)
		}
		shim := completionShim(p.Selector.MatchLabels["os"])
		if !strings.Contains(strings.Join(files, " "), shim) {
			t.Errorf("%s installs %v, not %s", p.Selector.MatchLabels["os"], files, shim)
		}
		content, err := os.ReadFile("../" + shim)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(content), "__complete") {
			t.Errorf("%s does not hand the words to the plugin's completion:\n%s", shim, content)
		}
	}
	if content, _ := os.ReadFile("../kubectl_complete-gitops.cmd"); !strings.Contains(string(content), "@kubectl-gitops.exe __complete %*") {
		t.Errorf("the Windows shim does not run kubectl-gitops.exe __complete with its words:\n%s", content)
	}
}
