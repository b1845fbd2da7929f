package redact

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestName(t *testing.T) {
	secret := []string{"password", "DB_PASSWORD", "dbPassword", "DBPassword", "db-pass", "api_key", "apiKey", "X-Api-Key",
		"AWS_SECRET_ACCESS_KEY", "tls.key", "client-secret", "GITHUB_TOKEN", "vault.io/token", "auth", "BASIC_AUTH",
		"authorization", "SENTRY_DSN", "connectionString", "private-key", "privateKey", "signing_key", "credentials", "passwd"}
	readable := []string{"oauth2-proxy", "cert-manager.io/issuer", "author", "key", "keys", "secretName", "tokenSecretRef",
		"PASSWORD_FILE", "TOKEN_TTL", "image", "replicas", "name", "value", "secretKeyRef", "monkey", "passenger", "tokenizer",
		"bypass", "compass", "AUTH_URL", "cache-key-prefix", "partition_key_name", "", "authentication.k8s.io/x"}
	for _, n := range secret {
		if !Name(n) {
			t.Errorf("Name(%q) = false, want true", n)
		}
	}
	for _, n := range readable {
		if Name(n) {
			t.Errorf("Name(%q) = true, want false", n)
		}
	}
}

func TestWords(t *testing.T) {
	for in, want := range map[string][]string{
		"DBPassword":        {"db", "password"},
		"oauth2Proxy":       {"oauth2", "proxy"},
		"tls.key":           {"tls", "key"},
		"AWS_SECRET_KEY":    {"aws", "secret", "key"},
		"cert-manager.io/x": {"cert", "manager", "io", "x"},
	} {
		if got := words(in); !reflect.DeepEqual(got, want) {
			t.Errorf("words(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestText(t *testing.T) {
	tests := []struct {
		in, secret string
	}{
		{"postgres://app:S3cretPassw0rd@db.internal:5432/orders", "S3cretPassw0rd"},
		{"--db-password=hunter2hunter2", "hunter2hunter2"},
		{"run with --api-key abcdefgh12 please", "abcdefgh12"},
		{"Authorization: Bearer abc.def.ghi-jkl", "abc.def.ghi-jkl"},
		{"x-api-key: zzz-yyy-xxx", "zzz-yyy-xxx"},
		{"-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEA"},
		{"-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjE (cut off)", "b3BlbnNzaC1rZXktdjE"},
		{"token ghp_abcdefghij1234567890", "ghp_abcdefghij1234567890"},
		{"leaked glpat-Ab3dEfGh", "glpat-Ab3dEfGh"},
		{"key AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"},
		{"jwt eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4", "eyJhbGciOiJIUzI1"},
		{"reason with password=hunter2 inside", "hunter2"},
		{`{"password":"hunter2"}`, "hunter2"},
		{"see https://x.example/cb?token=abcdef123&x=1", "abcdef123"},
		{"random Zq8vN3xLp0Rt7YwK2mHs9DcF4gJb", "Zq8vN3xLp0Rt7YwK2mHs9DcF4gJb"},
		{"slack xoxb-1234-abcdefgh", "xoxb-1234-abcdefgh"},
		// A token as a URL's user name, GitHub's documented forms: the
		// password alone was redacted, and the token kept.
		{"repo https://c0ffee1234:x-oauth-basic@github.com/org/deploy.git", "c0ffee1234"},
		{"repo https://c0ffee1234@github.com/org/deploy.git", "c0ffee1234"},
		{"repo https://oauth2:c0ffee1234@gitlab.example/org/deploy.git", "c0ffee1234"},
		{"repo https://c0ffee1234@user@git.example/org/deploy.git", "c0ffee1234"},
	}
	for _, tt := range tests {
		got := Text(tt.in)
		if strings.Contains(got, tt.secret) || !strings.Contains(got, Redacted) {
			t.Errorf("Text(%q) = %q: %q survived", tt.in, got, tt.secret)
		}
	}
	for _, keep := range []string{
		"5xx spike after 1.0.0, rolling back to registry.example/web:0.9.8",
		"revision 4f6c1d2e9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d",
		"image sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
		"uid 123e4567-e89b-12d3-a456-426614174000",
		"/spec/template/spec/containers/oauth2-proxy/image",
		"cert-manager.io/cluster-issuer: letsencrypt",
		"INC-42: OPS-7 https://argocd.example/applications/argocd/web",
		"/spec/template/spec/containers/WebServer2/env/LOG_LEVEL/value",
		"source ssh://git@github.com/org/deploy.git at main",
		"mail oncall@example.com about https://github.com/org/deploy/pull/7",
	} {
		if got := Text(keep); got != keep {
			t.Errorf("Text(%q) = %q, want it unchanged", keep, got)
		}
	}
}

// deployment is the kind most tests redact against: a built-in workload,
// whose schema keeps a few fields.
var deployment = GroupKind{Group: "apps", Kind: "Deployment"}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestValueDoesNotChangeItsInput(t *testing.T) {
	in := decode(t, `{"env":[{"name":"DB_PASSWORD","value":"hunter2"}],"password":"x","args":["--token","abc"]}`)
	before, _ := json.Marshal(in)
	out, _ := json.Marshal(Value(in))
	after, _ := json.Marshal(in)
	if string(before) != string(after) {
		t.Fatalf("Value changed its input: %s", after)
	}
	for _, s := range []string{"hunter2", `"x"`, `"abc"`} {
		if strings.Contains(string(out), s) {
			t.Errorf("Value kept %s: %s", s, out)
		}
	}
	// Names stay; args are free text, recorded by how many there are.
	if !strings.Contains(string(out), "DB_PASSWORD") || !strings.Contains(string(out), "2 arguments") {
		t.Errorf("Value dropped names or the args' shape: %s", out)
	}
}

func TestPatchResolvesJSONPatchPaths(t *testing.T) {
	live := decode(t, `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"w:1",
		"env":[{"name":"DB_PASSWORD","value":"old"},{"name":"LOG_LEVEL","value":"info"}],
		"args":["--serve","--db-password","old"]}]}}}}`).(map[string]any)
	body := `[{"op":"replace","path":"/spec/template/spec/containers/0/env/0/value","value":"canary-env-index"},
		{"op":"replace","path":"/spec/template/spec/containers/0/env/1/value","value":"debug"},
		{"op":"replace","path":"/spec/template/spec/containers/0/args/2","value":"canary-arg-next"},
		{"op":"add","path":"/spec/template/spec/containers/0/env/-","value":{"name":"API_TOKEN","value":"canary-env-append"}},
		{"op":"test","path":"/spec/template/spec/containers/0/env/0/value","value":"canary-test-op"},
		{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"w:2"}]`
	out, err := Patch([]byte(body), deployment, live)
	if err != nil {
		t.Fatal(err)
	}
	for _, canary := range []string{"canary-env-index", "canary-arg-next", "canary-env-append", "canary-test-op"} {
		if strings.Contains(out, canary) {
			t.Errorf("%s survived: %s", canary, out)
		}
	}
	// An env value is free text, whatever its name: only the image, a
	// field known to be safe, keeps its value.
	if strings.Contains(out, `"debug"`) {
		t.Errorf("an env value survived: %s", out)
	}
	for _, keep := range []string{`"w:2"`, "/spec/template/spec/containers/0/env/0/value"} {
		if !strings.Contains(out, keep) {
			t.Errorf("%s was lost: %s", keep, out)
		}
	}
	if got, _ := Resolve(live, "/spec/template/spec/containers/0/env/0/value"); got != "/spec/template/spec/containers/web/env/DB_PASSWORD/value" {
		t.Errorf("Resolve = %s", got)
	}
}

func TestPatchOfASecretKeepsOnlyTheShape(t *testing.T) {
	out, err := Patch([]byte(`{"stringData":{"username":"canary-user"},"data":{"x":"Y2FuYXJ5"}}`), GroupKind{Kind: "Secret"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "canary") || strings.Contains(out, "Y2FuYXJ5") || !strings.Contains(out, "username") {
		t.Errorf("secret patch = %s", out)
	}
}

func TestRedactorCatchesLearntValuesInErrors(t *testing.T) {
	r := &Redactor{}
	r.Learn(decode(t, `{"data":{"password":"plainwords"}}`), decode(t, `{"data":{"password":"[REDACTED]"}}`))
	msg := `ConfigMap "x" is invalid: data.password: Invalid value: "plainwords": too short; quoted \"plainwords\"`
	if got := r.Text(msg); strings.Contains(got, "plainwords") {
		t.Errorf("Redactor.Text = %q", got)
	}
	var nilRedactor *Redactor
	if got := nilRedactor.Text("password=x1"); strings.Contains(got, "x1") {
		t.Errorf("a nil Redactor must still redact patterns: %q", got)
	}
}

func TestPath(t *testing.T) {
	for path, want := range map[string]bool{
		"/spec/template/spec/containers/web/env/DB_PASSWORD/value": true,
		"/data/api-key":                                                       true,
		"/metadata/annotations/vault.io~1token":                               true,
		"/spec/template/spec/containers/oauth2-proxy/image":                   false,
		"/metadata/labels/cert-manager.io~1issuer":                            false,
		"/spec/template/spec/volumes/creds/secret/secretName":                 false,
		"/spec/template/spec/containers/web/env/X/valueFrom/secretKeyRef/key": false,
	} {
		if got := Path(path); got != want {
			t.Errorf("Path(%s) = %v, want %v", path, got, want)
		}
	}
}

// FuzzText checks that Text never panics and that a secret placed in the
// covered shapes never survives, whatever surrounds it.
func FuzzText(f *testing.F) {
	f.Add("prefix ", " suffix", "hunter2x9")
	f.Add("", "", "Zz9")
	f.Add("\x1b]0;", "\n", "p@ss:word")
	f.Fuzz(func(t *testing.T, before, after, secret string) {
		_ = Text(before + secret + after)
		if len(secret) < 6 || strings.ContainsAny(secret, " \t\r\n\"',;&@/:=}]\\") || strings.Contains(before+after, secret) || strings.Contains(Redacted, secret) {
			return
		}
		for _, shape := range []string{
			"postgres://user:" + secret + "@db/x",
			"--db-password=" + secret,
			"password=" + secret,
		} {
			if got := Text(before + " " + shape + " " + after); strings.Contains(got, secret) {
				t.Errorf("Text kept %q in %q", secret, got)
			}
		}
	})
}

// FuzzPatch checks that Patch never panics on any body and never keeps a
// value written to a secret-named env var or key.
func FuzzPatch(f *testing.F) {
	f.Add(`[{"op":"replace","path":"/a/0/b","value":1}]`, "canary-1")
	f.Add(`{"a":[{"name":"x"}]}`, "canary-2")
	f.Fuzz(func(t *testing.T, body, secret string) {
		_, _ = Patch([]byte(body), deployment, map[string]any{"a": []any{map[string]any{"name": "x"}}})
		if len(secret) < 4 || strings.Contains(Redacted, secret) {
			return
		}
		v, _ := json.Marshal(secret)
		sv := string(v)
		for _, b := range []string{
			`{"data":{"DB_PASSWORD":` + sv + `}}`,
			`{"spec":{"containers":[{"name":"w","env":[{"name":"API_TOKEN","value":` + sv + `}]}]}}`,
			`[{"op":"add","path":"/data/client-secret","value":` + sv + `}]`,
		} {
			out, err := Patch([]byte(b), deployment)
			if err != nil {
				t.Fatalf("Patch(%s): %v", b, err)
			}
			if strings.Contains(out, strings.Trim(sv, `"`)) {
				t.Errorf("Patch kept %s: %s", sv, out)
			}
		}
	})
}

// TestReviewFindings covers shapes an independent review found slipping
// through the first version of this package.
func TestReviewFindings(t *testing.T) {
	live := decode(t, `{"spec":{"containers":[{"name":"web","env":[{"name":"LOG","value":"x"}],"args":["--db-password"]}]}}`).(map[string]any)
	after := decode(t, `{"spec":{"containers":[{"name":"web","env":[{"name":"LOG","value":"x"},{"name":"DB_PASSWORD","value":"hunter2xyz"}],"args":["--db-password","hunter2abc"]}]}}`).(map[string]any)
	for _, body := range []string{
		`[{"op":"add","path":"/spec/containers/0/env/-","value":{"name":"DB_PASSWORD"}},{"op":"add","path":"/spec/containers/0/env/1/value","value":"hunter2xyz"}]`,
		`[{"op":"add","path":"/spec/containers/0/args/-","value":"hunter2abc"}]`,
		`[{"op":"add","path":"/spec/containers/0/ports/7/name","value":"hunter2xyz"}]`,
	} {
		out, err := Patch([]byte(body), deployment, live, after)
		if err != nil || strings.Contains(out, "hunter2") {
			t.Errorf("Patch(%s) = %s, %v", body, out, err)
		}
	}
	for _, name := range []string{"PGPASSWORD", "ADMINPASSWORD", "GITHUBTOKEN", "DB_PASSWORDS", "API_SECRETS", "tokens"} {
		if !Name(name) {
			t.Errorf("Name(%q) = false", name)
		}
	}
	v, _ := json.Marshal(Value(decode(t, `{"password":["hunter2xyz"],"credentials":{"value":"hunter2xyz"},"secret":{"secretName":"db"}}`)))
	if strings.Contains(string(v), "hunter2") || !strings.Contains(string(v), `"db"`) {
		t.Errorf("Value = %s", v)
	}
	for _, s := range []string{"password=x", "Authorization=Bearer tok123456", "token: abc"} {
		once := Text(s)
		if twice := Text(once); twice != once || strings.Contains(once, "tok123456") {
			t.Errorf("Text(%q) = %q, again %q", s, once, twice)
		}
	}
	if got := Text("auth:\n  rootPassword: x"); !strings.Contains(got, "rootPassword") {
		t.Errorf("a YAML key after auth: was eaten: %q", got)
	}
	sidecar := decode(t, `{"name":"auth-proxy","image":"proxy:1"}`)
	if got, _ := json.Marshal(At(deployment, "/spec/template/spec/containers/auth-proxy", sidecar)); !strings.Contains(string(got), "proxy:1") {
		t.Errorf("a container named auth-proxy was redacted: %s", got)
	}
}

// TestFreeTextIsRecordedByStructure: the shapes that slipped past pattern
// matching (a YAML block scalar, XML, an env name no rule knows, the short
// -p flag, a password inside sh -c) keep no text at all, while an image, a
// replica count and a resource limit keep their values.
func TestFreeTextIsRecordedByStructure(t *testing.T) {
	const canary = "Canary-7f3a9"
	for name, tc := range map[string]struct {
		path          string
		before, after any
	}{
		"yaml block scalar":  {"/data/app.yaml", "db:\n  host: x\n", "db:\n  host: x\n  password: |\n    " + canary + "\n"},
		"xml element":        {"/data/app.xml", "<db>\n</db>", "<db>\n<password>" + canary + "</password>\n</db>"},
		"xml attribute":      {"/data/web.config", "<a/>", `<add key="DbPassword" value="` + canary + `"/>`},
		"yaml anchor":        {"/data/app.yaml", "a: 1", "password: &p " + canary},
		"unicode escape":     {"/data/app.json", "{}", `{"\u0070assword": "` + canary + `"}`},
		"env name not known": {"/spec/template/spec/containers/web/env/MYSQL_ROOT_PW/value", nil, canary},
		"env admin pin":      {"/spec/template/spec/containers/web/env/ADMIN_PIN/value", "1", canary},
		"short -p flag":      {"/spec/template/spec/containers/web/args", []any{"-p"}, []any{"-p", canary}},
		"one argument":       {"/spec/template/spec/containers/web/args/1", "x", canary},
		"sh -c":              {"/spec/template/spec/containers/web/command", nil, []any{"sh", "-c", "mysql -p" + canary}},
		"long annotation":    {"/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration", nil, strings.Repeat("x", 300) + canary},
	} {
		b, a := Change(deployment, tc.path, tc.before, tc.after)
		out, _ := json.Marshal([]any{b, a})
		if strings.Contains(string(out), canary) || !strings.Contains(string(out), Redacted) {
			t.Errorf("%s: recorded %s", name, out)
		}
	}
	// What changed in a file is said by line and key, never by text.
	_, a := Change(deployment, "/data/app.properties", "a=1\nb=2\nc=3\n", "a=1\ndb.password="+canary+"\nc=3\n")
	if a != Redacted+" (3 lines; changed line 2: keys db.password, b)" {
		t.Errorf("a changed line: %v", a)
	}
	// A second pass over a stored record leaves the description alone.
	if b, a2 := Change(deployment, "/data/app.properties", Redacted+" (3 lines)", a); b != Redacted+" (3 lines)" || a2 != a {
		t.Errorf("second pass: %v %v", b, a2)
	}
	for path, v := range map[string]any{
		"/spec/template/spec/containers/web/image": "registry.example/web:1.2.4",
		"/spec/replicas": float64(3),
		"/spec/template/spec/containers/web/resources/limits/memory": "512Mi",
	} {
		if _, a := Change(deployment, path, nil, v); a != v {
			t.Errorf("%s: %v recorded as %v", path, v, a)
		}
	}
}

// FuzzConfigFileNeverLeaks: a secret planted under any key, in any of the
// config formats a ConfigMap holds, with any text around it, never reaches
// what is recorded of the file (before or after the change).
func FuzzConfigFileNeverLeaks(f *testing.F) {
	f.Add(uint8(0), uint8(0), "hunter2-Canary", "timeout: 5\n")
	f.Add(uint8(3), uint8(1), "s3cr3t!", "[db]\nhost=x\n")
	f.Add(uint8(5), uint8(2), "AKIA0000000000000000", "")
	keys := []string{"password", "DbPassword", "api_key", "MYSQL_ROOT_PW", "ADMIN_PIN", "SMTP_PASSCODE", "STRIPE_KEY", "client-secret", "token", "db.pass"}
	formats := []func(k, v string) string{
		func(k, v string) string { return k + ": " + v + "\n" },                        // YAML
		func(k, v string) string { return k + ": |\n  " + v + "\n" },                   // YAML block scalar
		func(k, v string) string { return `{"` + k + `": "` + v + `"}` },               // JSON
		func(k, v string) string { return "<" + k + ">" + v + "</" + k + ">\n" },       // XML
		func(k, v string) string { return `<add key="` + k + `" value="` + v + `"/>` }, // .NET
		func(k, v string) string { return k + " = " + v + "\n" },                       // INI
		func(k, v string) string { return k + "=" + v + "\n" },                         // properties
		func(k, v string) string { return "export " + k + "=" + v + "\n" },             // .env
	}
	f.Fuzz(func(t *testing.T, format, keyIndex uint8, secret, around string) {
		// The secret is the value: it is not in the text around it, nor
		// made of the key and what comes before or after it.
		key := keys[int(keyIndex)%len(keys)]
		if len(secret) < 4 || strings.Contains(Redacted, secret) || strings.Contains(around+key+around, secret) {
			t.Skip()
		}
		file := around + formats[int(format)%len(formats)](key, secret) + around
		for _, path := range []string{"/data/app.conf", "/binaryData/app.conf", "/spec/template/spec/containers/web/env/X/value", "/spec/template/spec/containers/web/args/1"} {
			b, a := Change(deployment, path, around, file)
			b2, a2 := Change(deployment, path, file, around)
			out, _ := json.Marshal([]any{b, a, b2, a2, At(deployment, path, file)})
			if strings.Contains(string(out), secret) {
				t.Fatalf("%s: the secret reached %s", path, out)
			}
		}
	})
}

// TestOnlyExactDescriptionsPassAgain: a second pass leaves what the first
// wrote alone, but a live value that only starts like a description is
// text like any other.
func TestOnlyExactDescriptionsPassAgain(t *testing.T) {
	path := "/spec/template/spec/containers/web/env/X/value"
	for _, d := range []string{Redacted, Redacted + " (3 lines)", Redacted + " (2 arguments)", Redacted + " (3 lines; changed line 2: keys db.password, b)"} {
		if _, a := Change(deployment, path, nil, d); a != d {
			t.Errorf("%q became %v", d, a)
		}
	}
	for _, v := range []string{Redacted + " hunter2", Redacted + " (3 lines) hunter2", Redacted + "hunter2"} {
		if _, a := Change(deployment, path, nil, v); strings.Contains(fmt.Sprint(a), "hunter2") {
			t.Errorf("%q was kept as %v", v, a)
		}
	}
}

// TestRedactorLearnsNoBooleans: a withheld boolean is not a literal to
// clean from errors, or every "true" in a server's message would go.
func TestRedactorLearnsNoBooleans(t *testing.T) {
	r := &Redactor{}
	v := decode(t, `{"spec":{"paused":true,"x":"hunter2x"}}`)
	r.Learn(v, At(GroupKind{"example.com", "Store"}, "", v))
	if got := r.Text(`spec.paused: Invalid value: true; "hunter2x"`); !strings.Contains(got, "true") || strings.Contains(got, "hunter2x") {
		t.Errorf("Redactor.Text = %q", got)
	}
}
