package audit

import (
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// Redacted replaces every value Redact removes.
const Redacted = redact.Redacted

// Redact removes secret values from r before it is hashed: every value of a
// Secret target, values judged secret by the field they resolve to, and
// credential-shaped text anywhere (reason, incident, errors, values). The
// engine already redacted the patch against the live object; this pass
// makes sure nothing written by any caller skips redaction.
func Redact(r *Record) {
	kind := r.Target.GroupKind()
	r.Reason = redact.Text(r.Reason)
	r.Incident = redact.Text(r.Incident)
	r.Outcome.Error = redact.Text(r.Outcome.Error)
	if r.Review != nil {
		r.Review.Note = redact.Text(r.Review.Note)
	}
	if r.Patch != nil {
		r.Patch.Body = redactBody(r.Patch.Body, kind)
	}
	for i := range r.Changes {
		c := &r.Changes[i]
		c.Before, c.After = redact.Change(kind, c.Path, c.Before, c.After)
	}
	if r.SyncPolicy != nil {
		r.SyncPolicy.Before, r.SyncPolicy.After = redact.Value(r.SyncPolicy.Before), redact.Value(r.SyncPolicy.After)
	}
	if r.OwnNotice != nil {
		for k, v := range r.OwnNotice.Annotations {
			r.OwnNotice.Annotations[k] = redact.Text(v)
		}
	}
}

// IsSecret is true for a core Secret, all of whose values are secret.
func (t *Target) IsSecret() bool {
	return t.GroupKind().IsSecret()
}

// GroupKind is the target's kind as redaction judges it; no target is no
// kind, whose values are all withheld.
func (t *Target) GroupKind() redact.GroupKind {
	if t == nil {
		return redact.GroupKind{}
	}
	return redact.GroupKind{Group: t.Group, Kind: t.Kind}
}

// redactBody redacts a JSON patch body; a body that is not JSON is redacted
// as text, line by line, so a `password: x` line never survives.
func redactBody(body string, kind redact.GroupKind) string {
	if out, err := redact.Patch([]byte(body), kind); err == nil {
		return out
	}
	if kind.IsSecret() {
		return Redacted
	}
	lines := strings.Split(body, "\n")
	for i, line := range lines {
		if k, _, ok := strings.Cut(line, ":"); ok && redact.Name(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(k), "- "))) {
			lines[i] = k + ": " + Redacted
			continue
		}
		lines[i] = redact.Text(line)
	}
	return strings.Join(lines, "\n")
}

// RedactObject returns a redacted copy of a Kubernetes object of kind t, for
// showing it (the plan's diff): values as the kind's schema keeps them in
// records, everything else by its structure.
func RedactObject(t Target, obj map[string]any) map[string]any {
	c, _ := redact.At(t.GroupKind(), "", obj).(map[string]any)
	if c == nil {
		return map[string]any{}
	}
	return c
}
