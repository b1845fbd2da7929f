package redact

import (
	"strings"
	"testing"
)

// TestSecretRuleRefuses: text a person types (a reason, an incident, a
// review note) that holds a secret is found, by the rule named.
func TestSecretRuleRefuses(t *testing.T) {
	for text, want := range map[string]string{
		"INC-1 pw=hunter2":                                                           "secret-assignment",
		"INC-9 password=cnry01-x7Qp":                                                 "secret-assignment",
		"the admin password is Tr0ub4dor&3":                                          "password-phrase",
		"db passwd was hunter2!":                                                     "password-phrase",
		"see postgres://app:p@ss@db.internal/orders":                                 "url-userinfo",
		"clone https://ghp0x9Kq2Lm7Zt4Wv8Rb1Yc6@github.com/org/repo":                 "url-userinfo",
		"hook https://hooks.slack.com/services/T0001/B0001/abcdefghijklmnopqrstuvwx": "slack-webhook-url",
		"rotating after leak of Zq8vN3xLp0Rt7YwK2mHs9DcF4gJb":                        "high-entropy-string",
		"key AKIAABCDEFGHIJKLMNOP leaked":                                            "aws-access-token",
		"revoked ghp_abcdefghij1234567890abcdefghij123456":                           "github-pat",
		"api_key: 0123456789abcdef0123456789abcdef":                                  "secret-assignment",
		"monitoring key=0123456789abcdef0123456789abcdef":                            "generic-api-key",
		"token eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4":                 "bearer-token",
		"jwt eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4":                   "jwt",
		"-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjE":                    "private-key",
		"curl -H 'Authorization: Basic dXNlcjpwYXNz'":                                "authorization-header",
		"ran it with --db-password hunter2":                                          "secret-flag",
	} {
		if got := SecretRule(text); got != want {
			t.Errorf("SecretRule(%q) = %q, want %q", text, got, want)
		}
	}
}

// TestSecretRulePasses: what incidents and reasons usually say is no
// secret.
func TestSecretRulePasses(t *testing.T) {
	for _, text := range []string{
		"5xx spike after 1.0.0", "INC-42", "rollback web to 0.9.8 per runbook", "OOMKilled pods in payments",
		"5xx spike after 1.0.0, rolling back to registry.example/web:0.9.8",
		"revert 4f6c1d2e9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d", "PagerDuty P1: checkout latency > 2s",
		"INC-42: OPS-7 https://argocd.example/applications/argocd/web", "the password is expired for the batch user",
		"rotate the DB password after the leak", "raise memory limit to 512Mi on web", "debug done, Git is right",
		"cert-manager.io/cluster-issuer: letsencrypt", "uid 123e4567-e89b-12d3-a456-426614174000",
	} {
		if got := SecretRule(text); got != "" {
			t.Errorf("SecretRule(%q) = %q, want none", text, got)
		}
	}
}

// TestTextRedactsWhatLeaked: the shapes issue #33 found in records.
func TestTextRedactsWhatLeaked(t *testing.T) {
	for in, secret := range map[string]string{
		"postgres://app:p@ss-Secret1@db.internal:5432/orders": "ss-Secret1",
		"INC-1 pw=hunter2":        "hunter2",
		"the password is hunter2": "hunter2",
		"hook https://hooks.slack.com/services/T0001/B0001/abcdefghijklmnop": "abcdefghijklmnop",
		"apikey=0123456789abcdef0123456789abcdef":                            "0123456789abcdef",
	} {
		if got := Text(in); strings.Contains(got, secret) {
			t.Errorf("Text(%q) = %q", in, got)
		}
	}
}
