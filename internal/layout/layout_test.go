// Package layout holds the test that keeps the packages' imports pointing
// the one way docs/design.md §1 draws.
package layout

import (
	"go/build"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/kubectl-gitops/kubectl-gitops/"

// allowed is docs/design.md §1: each package and the module's packages it
// may import. A package missing here may import nothing of ours.
var allowed = map[string][]string{
	"cmd/kubectl-gitops": {"plugin"},
	"plugin":             {"controller", "breakglass", "proposal", "drift", "argocd", "ticket", "audit", "redact", "next"},
	"controller":         {"breakglass", "proposal", "argocd", "audit", "next"},
	"breakglass":         {"proposal", "drift", "argocd", "ticket", "audit", "redact", "next"},
	"proposal":           {"argocd", "audit", "redact", "next"},
	"drift":              {"argocd", "audit", "redact", "next"},
	"ticket":             {"argocd", "audit", "redact", "next"},
	"argocd":             {"audit", "next"},
	"audit":              {"redact", "next"},
	"redact":             {"next"},
	"next":               {},
}

func TestImportsPointOneWay(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	for pkg, may := range allowed {
		p, err := build.ImportDir(filepath.Join(root, pkg), 0)
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		ok := map[string]bool{}
		for _, m := range may {
			ok[m] = true
		}
		var wrong []string
		for _, imp := range p.Imports {
			if ours, found := strings.CutPrefix(imp, module); found && !ok[ours] {
				wrong = append(wrong, ours)
			}
		}
		sort.Strings(wrong)
		if len(wrong) > 0 {
			t.Errorf("%s imports %s, which docs/design.md §1 does not let it", pkg, strings.Join(wrong, ", "))
		}
	}
}
