package drift

import (
	"errors"
	"strings"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

func TestContractDecidesBreakGlass(t *testing.T) {
	oncall := audit.Actor{Username: "sam", Groups: []string{"oncall", "system:authenticated"}}
	for _, tt := range []struct {
		c    Contract
		want string // "" allowed
	}{
		{Contract{Namespace: "web"}, ""},
		{Contract{Namespace: "web", Patches: PatchesAllowed}, ""},
		{Contract{Namespace: "web", Patches: PatchesBreakGlass, Groups: []string{"sre", "oncall"}}, ""},
		{Contract{Namespace: "web", Patches: PatchesForbidden}, "namespace web forbids live patches"},
		{Contract{Namespace: "web", Patches: PatchesForbidden, Groups: []string{"oncall"}}, "forbids live patches"},
		{Contract{Namespace: "web", Patches: PatchesBreakGlass, Groups: []string{"sre"}}, "lets only groups sre patch live state (kubectl-gitops.io/live-patch-groups); sam is in oncall, system:authenticated"},
		{Contract{Namespace: "web", Groups: []string{"sre"}}, "lets only groups sre"},
		{Contract{Namespace: "web", Patches: "Forbidden"}, `"Forbidden", which is none of forbidden, break-glass, allowed`},
	} {
		err := tt.c.AllowsBreakGlass(oncall)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%+v refused: %v", tt.c, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrContract) || !errors.Is(err, argocd.ErrForbidden)):
			t.Errorf("%+v: %v, want a contract refusal containing %q", tt.c, err, tt.want)
		}
	}
	for _, tt := range []struct {
		patches string
		class   Class
		flagged bool
	}{
		{PatchesForbidden, Manual, true}, {PatchesForbidden, Pipeline, true}, {PatchesBreakGlass, Manual, true},
		{PatchesBreakGlass, BreakGlass, false}, {PatchesForbidden, Controller, false}, {PatchesAllowed, Manual, false}, {"", Manual, false},
	} {
		if got := (Contract{Namespace: "web", Patches: tt.patches}).violatedBy(tt.class) != ""; got != tt.flagged {
			t.Errorf("%s write where live patches are %q: flagged %v, want %v", tt.class, tt.patches, got, tt.flagged)
		}
	}
}
