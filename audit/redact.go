package audit

import (
	"encoding/json"
	"regexp"
	"strings"
)

// Redacted replaces every value Redact removes.
const Redacted = "[REDACTED]"

// secretName matches names of keys and environment variables that hold
// credentials.
var secretName = regexp.MustCompile(`(?i)(pass(word|wd)?|secret|token|api[-_]?key|private[-_]?key|credential|auth|cert|\bkey$|_key$|-key$|dsn|conn(ection)?[-_]?str)`)

// tokenLike matches credential-shaped strings wherever they appear: bearer
// and basic authorization values, JWTs, and well-known token prefixes.
var tokenLike = regexp.MustCompile(`(?i)\b(bearer|basic)\s+[a-z0-9._~+/=-]{8,}|\beyJ[a-zA-Z0-9_-]{8,}\.[a-zA-Z0-9_-]{8,}\.[a-zA-Z0-9_-]{4,}|\b(ghp|gho|ghs|ghu|github_pat|glpat)[-_][A-Za-z0-9_-]{16,}|\bxox[abpr]-[A-Za-z0-9-]{10,}|\bsk[-_][A-Za-z0-9]{16,}|\bAKIA[0-9A-Z]{16}\b`)

// Redact removes secret values from r in place, before it is hashed: all
// data of a Secret target, values of keys or env vars whose names look secret,
// and token-shaped strings anywhere in free text.
func Redact(r *Record) {
	secretTarget := r.Target != nil && r.Target.Kind == "Secret" && r.Target.Group == ""
	r.Reason = redactText(r.Reason)
	r.Incident = redactText(r.Incident)
	r.Outcome.Error = redactText(r.Outcome.Error)
	if r.Patch != nil {
		if secretTarget {
			r.Patch.Body = Redacted
		} else {
			r.Patch.Body = redactPatchBody(r.Patch.Body)
		}
	}
	for i := range r.Changes {
		c := &r.Changes[i]
		if secretTarget || pathLooksSecret(c.Path) {
			c.Before, c.After = redactedOrNil(c.Before), redactedOrNil(c.After)
			continue
		}
		c.Before, c.After = redactValue(c.Before), redactValue(c.After)
	}
	if r.SyncPolicy != nil {
		r.SyncPolicy.Before, r.SyncPolicy.After = redactValue(r.SyncPolicy.Before), redactValue(r.SyncPolicy.After)
	}
}

func redactedOrNil(v any) any {
	if v == nil {
		return nil
	}
	return Redacted
}

func redactText(s string) string {
	return tokenLike.ReplaceAllString(s, Redacted)
}

// pathLooksSecret is true for a change path through a secret-looking key,
// such as /data/password or /spec/.../env/DB_PASSWORD/value.
func pathLooksSecret(path string) bool {
	for _, seg := range strings.Split(path, "/") {
		if seg != "" && secretName.MatchString(seg) {
			return true
		}
	}
	return false
}

// redactPatchBody redacts a JSON or YAML patch body. A body that is not JSON
// is redacted as text, line by line, so a `password: x` line never survives.
func redactPatchBody(body string) string {
	var v any
	if err := json.Unmarshal([]byte(body), &v); err == nil {
		out, err := json.Marshal(redactValue(v))
		if err == nil {
			return string(out)
		}
	}
	lines := strings.Split(body, "\n")
	for i, line := range lines {
		if k, _, ok := strings.Cut(line, ":"); ok && secretName.MatchString(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(k), "- "))) {
			lines[i] = k + ": " + Redacted
			continue
		}
		lines[i] = redactText(line)
	}
	return strings.Join(lines, "\n")
}

// redactValue walks a JSON value: members with secret-looking names, the
// value of a {"name": SECRET-LOOKING, "value": …} env entry, and token-like
// strings are replaced.
func redactValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		if name, ok := t["name"].(string); ok && secretName.MatchString(name) {
			if _, has := t["value"]; has {
				t["value"] = Redacted
			}
		}
		for k, val := range t {
			if secretName.MatchString(k) && !isContainer(val) {
				t[k] = redactedOrNil(val)
				continue
			}
			t[k] = redactValue(val)
		}
		return t
	case []any:
		for i := range t {
			t[i] = redactValue(t[i])
		}
		return t
	case string:
		return redactText(t)
	}
	return v
}

func isContainer(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}

// RedactObject returns a redacted copy of a Kubernetes object of kind t, for
// showing it: all data of a Secret, and what Redact removes from patches.
func RedactObject(t Target, obj map[string]any) map[string]any {
	var c map[string]any
	b, err := json.Marshal(obj)
	if err != nil || json.Unmarshal(b, &c) != nil {
		return map[string]any{}
	}
	if t.Kind == "Secret" && t.Group == "" {
		for _, field := range []string{"data", "stringData"} {
			if m, ok := c[field].(map[string]any); ok {
				for k := range m {
					m[k] = Redacted
				}
			}
		}
	}
	return redactValue(c).(map[string]any)
}
