package breakglass

import (
	"encoding/json"
	"fmt"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// Size limits that keep a break-glass storable: the session annotation
// shares the Application's 256 KiB of annotations with everything else, and
// a record is one ConfigMap (1 MiB of data).
const (
	MaxSessionBytes = 64 << 10
	MaxRecordBytes  = 900 << 10
)

// patchRedaction is the patch as it may be stored and shown.
type patchRedaction struct {
	body     string
	redactor *redact.Redactor
}

// redactPatch redacts a patch body against the live object it applies to,
// learning the secret values so that later text (a server's error) can be
// cleaned of them too.
func redactPatch(t audit.Target, patchType string, body []byte, objs ...map[string]any) (*patchRedaction, error) {
	out, err := redact.Patch(body, t.GroupKind(), objs...)
	if err != nil {
		return nil, fmt.Errorf("the %s patch: %v", patchType, err)
	}
	var original, redacted any
	_ = json.Unmarshal(body, &original)
	_ = json.Unmarshal([]byte(out), &redacted)
	r := &redact.Redactor{}
	r.Learn(original, redacted)
	return &patchRedaction{body: out, redactor: r}, nil
}

// changes redacts the changed fields by the field each path resolves to in
// objs (before and after the patch); the secret values found are learnt too.
func (pr *patchRedaction) changes(t audit.Target, changes []audit.Change, objs ...map[string]any) []audit.Change {
	out := make([]audit.Change, len(changes))
	for i, c := range changes {
		before, after := redact.Change(t.GroupKind(), c.Path, c.Before, c.After)
		if redact.AfterSecretFlag(c.Path, objs) {
			before, after = redact.All(c.Before), redact.All(c.After)
		}
		pr.redactor.Learn(c.Before, before)
		pr.redactor.Learn(c.After, after)
		out[i] = audit.Change{Path: c.Path, Before: before, After: after}
	}
	return out
}

// patchedFields are the session's view of the changes: paths and digests.
// A field whose value before or after holds anything secret keeps none.
func patchedFields(t audit.Target, changes []audit.Change, objs ...map[string]any) []PatchedField {
	out := make([]PatchedField, len(changes))
	for i, c := range changes {
		if t.IsSecret() || redact.AfterSecretFlag(c.Path, objs) || redact.Path(c.Path) ||
			!equalJSON(redact.At(t.GroupKind(), c.Path, c.After), c.After) || !equalJSON(redact.At(t.GroupKind(), c.Path, c.Before), c.Before) {
			out[i] = PatchedField{Path: c.Path, Secret: true}
			continue
		}
		out[i] = PatchedField{Path: c.Path, Before: digest(c.Before), After: digest(c.After)}
	}
	return out
}

// rawPatch is the patch exactly as the user gave it (the --patch text or
// the --patch-file bytes), or the JSON built from the --image/--replicas
// shortcuts: what the record's keyed digest covers.
func rawPatch(spec PatchSpec, built []byte) []byte {
	if spec.Body != "" {
		return []byte(spec.Body)
	}
	return built
}

// Redact cleans text of this plan's secret values and of anything
// credential-shaped, for errors and warnings that may echo the patch.
func (p *Plan) Redact(s string) string {
	if p.redaction == nil {
		return redact.Text(s)
	}
	return p.redaction.redactor.Text(s)
}

// RedactErr is err with its text redacted as p redacts, still err to
// errors.Is and errors.As (a conflict stays a conflict): only the text
// goes into records and onto the screen.
func (p *Plan) RedactErr(err error) error {
	if err == nil {
		return nil
	}
	return &redactedError{text: p.Redact(err.Error()), err: err}
}

type redactedError struct {
	text string
	err  error
}

func (e *redactedError) Error() string { return e.text }
func (e *redactedError) Unwrap() error { return e.err }

// RecordedPatch is the patch as its records keep it.
func (p *Plan) RecordedPatch() *audit.Patch {
	return &audit.Patch{Type: p.PatchType, Body: p.PatchRedacted, HMAC: p.PatchHMAC, KeyID: p.PatchKeyID}
}
