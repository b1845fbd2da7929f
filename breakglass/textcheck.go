package breakglass

import (
	"fmt"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// ErrSecretText is text a person typed (a reason, an incident, a review
// note) in which a secret rule found something. Records are immutable, so
// such text is refused before anything is written, unless the person
// confirms that it holds no secret.
var ErrSecretText = fmt.Errorf("text that looks like a secret: %w", argocd.ErrInvalidInput)

// textInput is one text a person typed and the input it came from.
type textInput struct {
	in   argocd.Input
	text string
}

// checkText refuses the first of texts that a secret rule finds something
// in; the refusal names the rule and the input, never the text.
func checkText(texts ...textInput) error {
	for _, t := range texts {
		if rule := redact.SecretRule(t.text); rule != "" {
			return &argocd.InputError{Input: t.in, Kind: ErrSecretText,
				Problem: fmt.Sprintf("looks like it holds a secret (rule %s), and audit records are kept for good: take it out", rule)}
		}
	}
	return nil
}

// CheckText is checkText for one input, for forms that check as a person
// types.
func CheckText(in argocd.Input, text string) error {
	return checkText(textInput{in, text})
}

// confirmedText is what a record keeps when the person confirmed their
// text despite the check (allow): which rule found something in which
// input, never the text, which is redacted as always. nil when they did not
// confirm.
func confirmedText(allow bool, texts ...textInput) *audit.TextCheck {
	if !allow {
		return nil
	}
	check := &audit.TextCheck{Confirmed: true}
	for _, t := range texts {
		if rule := redact.SecretRule(t.text); rule != "" {
			check.Findings = append(check.Findings, audit.TextFinding{Input: string(t.in), Rule: rule})
		}
	}
	return check
}

// texts are the request's texts a person typed.
func (r Request) texts() []textInput {
	return []textInput{{InputReason, r.Reason}, {InputIncident, r.Incident}}
}
