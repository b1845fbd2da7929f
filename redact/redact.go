// Package redact is the one layer that keeps secret values and hostile text
// out of everything kubectl gitops stores or shows: audit records, the
// session annotation, Jira content, and what commands print. Audit records
// are immutable, so a secret that reaches one is there for good; every sink
// goes through this package.
//
// A live resource's value is kept only where its kind's schema (schema.go)
// knows the field to be safe; everything else, every custom resource's
// value included, is recorded by its structure. Kept values, and text that
// is not a resource's field, are judged again by the field they resolve to
// (the key, or the name of the list item they sit in, such as an env var)
// and by their own shape (credentials in URLs, secret-looking --flags,
// headers, private keys, token formats). It must never decide by a field's
// name alone that a value is safe. Nothing here modifies the values it is given:
// every function returns a copy, because the engine acts on the originals.
package redact

import (
	"math"
	"regexp"
	"strings"
	"unicode"
)

// Redacted replaces every secret value.
const Redacted = "[REDACTED]"

// secretWords are the words of a name that say its value is a credential.
var secretWords = map[string]bool{
	"password": true, "passwd": true, "pwd": true, "pass": true, "passphrase": true,
	"secret": true, "token": true, "credential": true, "credentials": true, "creds": true,
	"apikey": true, "privatekey": true, "auth": true, "authorization": true, "bearer": true,
	"dsn": true, "cookie": true, "jwt": true, "pat": true, "otp": true, "sessionkey": true, "pw": true,
	"connectionstring": true, "connstr": true, "accesskey": true, "secretkey": true,
}

// secretSuffixes are secret words long enough to recognise at the end of a
// run-together name: PGPASSWORD, DBPASS is too short to tell, GITHUBTOKEN.
var secretSuffixes = []string{"password", "passwd", "passphrase", "secret", "token", "credential", "credentials"}

// keyQualifiers make "key" a credential when they come right before it:
// API_KEY, AWS_SECRET_ACCESS_KEY, tls.key, signingKey. A bare "key" (as in
// tolerations or secretKeyRef) is a field name, not a secret.
var keyQualifiers = map[string]bool{
	"api": true, "access": true, "secret": true, "private": true, "signing": true, "encryption": true,
	"ssh": true, "tls": true, "client": true, "master": true, "account": true, "license": true,
	"session": true, "hmac": true, "gpg": true, "pgp": true, "rsa": true, "service": true, "auth": true,
	"storage": true, "sas": true, "crypt": true, "ed25519": true, "ecdsa": true, "webhook": true,
}

// notSecretLast are final words that make a name describe a credential
// rather than hold one: PASSWORD_FILE is a path, secretName and
// tokenSecretRef are references, TOKEN_TTL is a duration.
var notSecretLast = map[string]bool{
	"name": true, "names": true, "ref": true, "refs": true, "path": true, "file": true, "filename": true,
	"dir": true, "mount": true, "namespace": true, "url": true, "uri": true, "endpoint": true, "host": true,
	"port": true, "type": true, "kind": true, "ttl": true, "expiry": true, "expiration": true, "expires": true,
	"enabled": true, "mode": true, "policy": true, "version": true, "count": true, "timeout": true,
	"duration": true, "format": true, "length": true, "id": true, "issuer": true, "audience": true,
	"provider": true, "method": true, "strategy": true, "rotation": true, "selector": true,
}

// Name reports whether a key, variable or flag name says its value is a
// credential. It looks at whole words, so oauth2-proxy, cert-manager.io/x
// and author stay readable.
func Name(name string) bool {
	words := words(name)
	if len(words) == 0 || notSecretLast[words[len(words)-1]] {
		return false
	}
	for i, w := range words {
		if secretWords[w] || secretWords[strings.TrimSuffix(w, "s")] || (i+1 < len(words) && secretWords[w+words[i+1]]) {
			return true
		}
		for _, suffix := range secretSuffixes {
			if strings.HasSuffix(strings.TrimSuffix(w, "s"), suffix) {
				return true
			}
		}
		if (w == "key" || w == "keys") && i > 0 && keyQualifiers[words[i-1]] {
			return true
		}
	}
	return false
}

// words splits a name into lowercase words at punctuation and at camelCase
// boundaries: "DBPassword" is db, password; "tls.key" is tls, key.
func words(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	runes := []rune(name)
	for i, r := range runes {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			continue
		}
		if unicode.IsUpper(r) && len(cur) > 0 {
			prev := runes[i-1]
			nextLower := i+1 < len(runes) && unicode.IsLower(runes[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return words
}

var (
	pemPrivateKey = regexp.MustCompile(`(?s)-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?(-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|$)`)
	secretHeader  = regexp.MustCompile(`(?i)\b(authorization|proxy-authorization|x-api-key|x-auth-token|x-access-token|private-token|api-key|set-cookie|cookie)(\s*:\s*)[^\r\n]*`)
	// urlUserinfo is a URL's whole user-info, to the last @ before the
	// host's path: a token is often the user name
	// (https://TOKEN@github.com/…, https://TOKEN:x-oauth-basic@…), and a
	// password may hold an unencoded @.
	urlUserinfo = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.\-]*://)([^\s/"'?#]+)@`)
	// urlPassword runs to the last @ of the word, past a /: a password
	// may hold an unencoded / too.
	urlPassword = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@"']*):([^\s"']+)@`)
	// flagKey is "--flag=" or "--flag " and keyKey is "key=" or "key: "
	// (quoted keys too, as in JSON text): what follows is the value.
	flagKey    = regexp.MustCompile(`(--?)([A-Za-z][A-Za-z0-9_.\-]*)(=|[ \t]+)`)
	keyKey     = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_.\-]*)(["']?[ \t]*[=:][ \t]*)`)
	authScheme = regexp.MustCompile(`(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=\-]{8,}`)
	// passwordPhrase is a password stated in words: "the password is x".
	passwordPhrase = regexp.MustCompile(`(?i)\b(password|passwd|passphrase|passcode|pwd|pw|pin)(\s+(?:is|was)\s+["']?)([^\s"',;]+)`)
	// genericKey is gitleaks' generic-api-key: a key-like name assigned a
	// value of 10 or more characters, a secret when the value is random.
	genericKey = regexp.MustCompile(`(?i)\b([\w.\-]*(?:key|api|token|secret|client|passwd|password|auth|access)[\w.\-]*)(\s*(?:=|:|=>|:=)\s*["']?)([\w.=+/~\-]{10,150})`)
	// tokenCandidate is a run that may be a random credential; highEntropy
	// decides.
	tokenCandidate = regexp.MustCompile(`[A-Za-z0-9+_\-]{20,}={0,2}`)
)

// notAPassword are words that follow "the password is" without being one.
var notAPassword = map[string]bool{
	"expired": true, "wrong": true, "incorrect": true, "rotated": true, "reset": true, "changed": true,
	"required": true, "set": true, "empty": true, "missing": true, "invalid": true, "unknown": true,
	"not": true, "needed": true, "correct": true, "the": true, "a": true, "in": true, "stored": true,
}

// A rule finds one shape of secret in text and redacts it. The rules are
// data, one per shape, named with gitleaks' rule ids where gitleaks has
// one (its default rule set is the maintained reference for these shapes);
// gitleaks itself is not a dependency, because its module is not one this
// project can fetch and it is a repository scanner with a configuration
// loader, not a check of one line a person typed. Text applies every rule;
// SecretRule names the first that finds something, to refuse text before
// it is written.
type rule struct {
	id     string
	redact func(string) string
}

// rules are applied in order: the shapes that say where a secret is (a
// key, a header, a URL) before the shapes of secrets themselves.
var rules = []rule{
	{"private-key", replace(pemPrivateKey, Redacted)},
	{"authorization-header", replace(secretHeader, "${1}${2}"+Redacted)},
	{"url-userinfo", func(s string) string {
		return urlPassword.ReplaceAllString(replaceGroup(urlUserinfo, 2, notSSHUser)(s), "${1}:"+Redacted+"@")
	}},
	{"slack-webhook-url", token(`(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{20,}`)},
	{"microsoft-teams-webhook", token(`https://[a-z0-9\-]+\.webhook\.office\.com/webhookb2/[^\s"']+`)},
	{"discord-webhook-url", token(`https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_\-]+`)},
	{"bearer-token", replace(authScheme, "${1}${2}"+Redacted)},
	{"secret-flag", func(s string) string { return redactAfterKeys(s, flagKey, 2) }},
	{"secret-assignment", func(s string) string { return redactAfterKeys(s, keyKey, 1) }},
	{"password-phrase", replaceGroup(passwordPhrase, 3, func(v string) bool { return !notAPassword[strings.ToLower(v)] })},
	{"jwt", token(`\beyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*`)},
	{"github-pat", token(`\b(ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{8,}|\bgithub_pat_[A-Za-z0-9_]{8,}`)},
	{"gitlab-pat", token(`\bgl(pat|rt|dt|ptt)-[A-Za-z0-9_\-]{8,}`)},
	{"slack-bot-token", token(`\bxox[abposre]-[A-Za-z0-9\-]{8,}`)},
	{"slack-app-token", token(`\bxapp-[A-Za-z0-9\-]{8,}`)},
	{"stripe-access-token", token(`\b[spr]k_(live|test)_[A-Za-z0-9]{8,}`)},
	{"openai-api-key", token(`\bsk-[A-Za-z0-9_\-]{16,}`)},
	{"aws-access-token", token(`\b(AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{12,}`)},
	{"gcp-api-key", token(`\bAIza[A-Za-z0-9_\-]{20,}`)},
	{"npm-access-token", token(`\bnpm_[A-Za-z0-9]{20,}`)},
	{"pypi-upload-token", token(`\bpypi-[A-Za-z0-9_\-]{20,}`)},
	{"digitalocean-pat", token(`\bdop_v1_[a-f0-9]{20,}`)},
	{"shopify-access-token", token(`\bshp(at|ss|ca|pa)_[a-fA-F0-9]{16,}`)},
	{"vault-service-token", token(`\bhv[sbr]\.[A-Za-z0-9_\-]{20,}`)},
	{"sendgrid-api-token", token(`\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}`)},
	{"gcp-oauth-token", token(`\bya29\.[A-Za-z0-9_\-]{20,}`)},
	{"dockerhub-pat", token(`\bdckr_pat_[A-Za-z0-9_\-]{16,}`)},
	{"azure-storage-key", token(`\bAccountKey=[A-Za-z0-9+/=]{16,}`)},
	{"generic-api-key", replaceGroup(genericKey, 3, func(v string) bool { return !described(v) && entropy(v) >= 3.5 })},
	{"high-entropy-string", replaceGroup(tokenCandidate, 0, highEntropy)},
}

// notSSHUser is whether a URL's user-info is anything but git, the user
// name every Git host's SSH URLs share (ssh://git@github.com/…): a reason
// naming a repository that way holds no secret.
func notSSHUser(userinfo string) bool { return userinfo != "git" }

// replace is a rule that rewrites every match of re with repl (a template).
func replace(re *regexp.Regexp, repl string) func(string) string {
	return func(s string) string { return re.ReplaceAllString(s, repl) }
}

// token is a rule whose whole match is the secret.
func token(pattern string) func(string) string {
	return replace(regexp.MustCompile(pattern), Redacted)
}

// replaceGroup is a rule that redacts group n of each match of re (0: the
// whole match) when secret says the text there is one.
func replaceGroup(re *regexp.Regexp, n int, secret func(string) bool) func(string) string {
	return func(s string) string {
		matches := re.FindAllStringSubmatchIndex(s, -1)
		for i := len(matches) - 1; i >= 0; i-- {
			start, end := matches[i][2*n], matches[i][2*n+1]
			if start >= 0 && secret(s[start:end]) {
				s = s[:start] + Redacted + s[end:]
			}
		}
		return s
	}
}

// Text redacts credential-shaped parts of free text: private keys,
// authorization-style headers, passwords in URLs, webhook URLs,
// secret-looking --flags and key=value pairs, passwords stated in words,
// known token formats, and long random-looking strings.
func Text(s string) string {
	if s == "" {
		return s
	}
	for _, r := range rules {
		s = r.redact(s)
	}
	return s
}

// SecretRule names the first rule that finds a secret in s ("" for none):
// text a person typed is checked with it before anything is written.
func SecretRule(s string) string {
	for _, r := range rules {
		if r.redact(s) != s {
			return r.id
		}
	}
	return ""
}

// redactAfterKeys redacts the value after each match of re whose group
// name is a secret-looking name. Matches are found without their values,
// so a harmless key (like https:) never swallows a secret one after it.
func redactAfterKeys(s string, re *regexp.Regexp, name int) string {
	matches := re.FindAllStringSubmatchIndex(s, -1)
	for i := len(matches) - 1; i >= 0; i-- {
		m := matches[i]
		if !Name(s[m[2*name]:m[2*name+1]]) {
			continue
		}
		start := m[1]
		if strings.HasPrefix(s[start:], Redacted) || strings.HasPrefix(s[start:], `"`+Redacted) {
			continue
		}
		end := valueEnd(s, start)
		v := s[start:end]
		if end == start || strings.Trim(v, `"'`) == Redacted {
			continue
		}
		repl := Redacted
		if q := v[0]; q == '"' || q == '\'' {
			repl = string(q) + Redacted + string(q)
		}
		s = s[:start] + repl + s[end:]
	}
	return s
}

// valueEnd finds where a value starting at start ends: at its closing quote
// when quoted, else at white space or a separator.
func valueEnd(s string, start int) int {
	if start >= len(s) {
		return start
	}
	if q := s[start]; q == '"' || q == '\'' {
		if end := strings.IndexByte(s[start+1:], q); end >= 0 {
			return start + end + 2
		}
		return len(s)
	}
	if end := strings.IndexAny(s[start:], " \t\r\n\"',;&}]"); end >= 0 {
		return start + end
	}
	return len(s)
}

// highEntropy is true for a string that looks machine-generated: upper and
// lower case letters and digits, and about four bits of entropy or more
// per character. Names, paths, image references, Git revisions and UUIDs
// (one case only) stay readable.
func highEntropy(s string) bool {
	var upper, lower, digit bool
	for _, r := range s {
		switch {
		case unicode.IsUpper(r):
			upper = true
		case unicode.IsLower(r):
			lower = true
		case unicode.IsDigit(r):
			digit = true
		}
	}
	return upper && lower && digit && entropy(s) >= 3.9
}

// entropy is the Shannon entropy of s in bits per character.
func entropy(s string) float64 {
	counts := map[rune]int{}
	n := 0
	for _, r := range s {
		counts[r]++
		n++
	}
	var h float64
	for _, c := range counts {
		p := float64(c) / float64(n)
		h -= p * math.Log2(p)
	}
	return h
}

// AfterSecretFlag is whether path is an argument right after a
// secret-looking --flag in any of objs.
func AfterSecretFlag(path string, objs []map[string]any) bool {
	for _, obj := range objs {
		if _, afterFlag := Resolve(obj, path); afterFlag {
			return true
		}
	}
	return false
}
