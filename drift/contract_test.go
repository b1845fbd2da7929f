package drift

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
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

func TestContractBoundsThePause(t *testing.T) {
	yes, no := true, false
	for _, tt := range []struct {
		name        string
		c           Contract
		asked       time.Duration
		autoRestore *bool
		want        time.Duration
		wantRestore bool
		wantErr     string
	}{
		{name: "no contract, nothing asked: no expiry", want: 0},
		{name: "no contract: what was asked", asked: time.Hour, want: time.Hour},
		{name: "the contract's maximum by default", c: Contract{MaxPause: "8h"}, want: 8 * time.Hour},
		{name: "less than the maximum", c: Contract{MaxPause: "8h"}, asked: 2 * time.Hour, want: 2 * time.Hour},
		{name: "the maximum itself", c: Contract{MaxPause: "8h"}, asked: 8 * time.Hour, want: 8 * time.Hour},
		{name: "over the maximum", c: Contract{Namespace: "shop", MaxPause: "8h"}, asked: 9 * time.Hour, wantErr: "namespace shop pauses sync for at most 8h0m0s"},
		{name: "a maximum spelt wrongly", c: Contract{MaxPause: "8 hours"}, wantErr: `"8 hours", which is not a duration`},
		{name: "a zero maximum", c: Contract{MaxPause: "0s"}, wantErr: "which is not a duration"},
		{name: "auto-restore by contract", c: Contract{AutoRestore: "true"}, wantRestore: true},
		{name: "the user turns it off", c: Contract{AutoRestore: "true"}, autoRestore: &no, wantRestore: false},
		{name: "the user turns it on", autoRestore: &yes, wantRestore: true},
		{name: "auto-restore spelt wrongly", c: Contract{AutoRestore: "yes"}, wantErr: `"yes", which is neither true nor false`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, restore, err := tt.c.Pause(tt.asked, tt.autoRestore)
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrContract) {
					t.Errorf("Pause = %v, %v; want %q", got, err, tt.wantErr)
				}
			case err != nil || got != tt.want || restore != tt.wantRestore:
				t.Errorf("Pause = %v, %v, %v; want %v, %v", got, restore, err, tt.want, tt.wantRestore)
			}
		})
	}
}

// TestContractCheckFindsAMisspeltPause: a max-pause that is not a duration
// refuses every break-glass there; contract check says so before an
// incident finds out.
func TestContractCheckFindsAMisspeltPause(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Annotations: map[string]string{ContractMaxPause: "a day"}}}
	c := &argocd.Client{Kube: fake.NewSimpleClientset(ns)}
	app := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"destination": map[string]any{"server": argocd.InClusterServer, "namespace": "shop"}}}}
	app.SetName("web")
	findings, notes, err := CheckContracts(context.Background(), c, []argocd.App{argocd.AppOf(app)})
	if err != nil || len(notes) > 0 || len(findings) != 1 || !strings.Contains(findings[0].Problem, `"a day", which is not a duration`) {
		t.Errorf("contract check: %+v %v %v", findings, notes, err)
	}
}
