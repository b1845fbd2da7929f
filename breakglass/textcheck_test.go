package breakglass

import (
	"errors"
	"strings"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
)

// TestEveryTypedTextIsChecked: the break-glass reason and incident, a
// forced restore's reason and a review's note are each refused when a
// secret rule finds something, as invalid input naming the rule and never
// the text, and pass when confirmed.
func TestEveryTypedTextIsChecked(t *testing.T) {
	const secret = "INC-1 pw=hunter2"
	three := int32(3)
	patch := PatchSpec{Replicas: &three}
	for name, tc := range map[string]struct {
		refused, confirmed interface{ Validate() error }
	}{
		"reason":         {Request{Target: "deployment/web", Patch: patch, Reason: secret}, Request{Target: "deployment/web", Patch: patch, Reason: secret, AllowSecretText: true}},
		"incident":       {Request{Target: "deployment/web", Patch: patch, Reason: "r", Incident: secret}, Request{Target: "deployment/web", Patch: patch, Reason: "r", Incident: secret, AllowSecretText: true}},
		"restore reason": {RestoreRequest{Force: true, Reason: secret}, RestoreRequest{Force: true, Reason: secret, AllowSecretText: true}},
		"review note":    {ReviewRequest{Session: "s", Approve: true, Note: secret}, ReviewRequest{Session: "s", Approve: true, Note: secret, AllowSecretText: true}},
	} {
		err := tc.refused.Validate()
		if !errors.Is(err, ErrSecretText) || !errors.Is(err, argocd.ErrInvalidInput) || !strings.Contains(err.Error(), "rule secret-assignment") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v", name, err)
		}
		if err := tc.confirmed.Validate(); err != nil {
			t.Errorf("%s confirmed: %v", name, err)
		}
	}
	if err := (Request{Target: "deployment/web", Patch: patch, Reason: "5xx spike after 1.0.0", Incident: "INC-42"}).Validate(); err != nil {
		t.Errorf("a plain reason: %v", err)
	}
}

// TestConfirmedTextIsRecordedByRule: the record of a confirmed text names
// the input and rule, never the text.
func TestConfirmedTextIsRecordedByRule(t *testing.T) {
	r := Request{Reason: "rollback", Incident: "INC-1 pw=hunter2", AllowSecretText: true}
	check := confirmedText(r.AllowSecretText, r.texts()...)
	if check == nil || !check.Confirmed || len(check.Findings) != 1 || check.Findings[0].Input != "incident" || check.Findings[0].Rule != "secret-assignment" {
		t.Errorf("text check %+v", check)
	}
	if confirmedText(false, r.texts()...) != nil {
		t.Error("a text check without confirmation")
	}
}
