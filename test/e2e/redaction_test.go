//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// canaries are distinct values put through every channel a secret can
// take into kubectl gitops; none may come out anywhere but the patched
// objects themselves.
type canaries struct {
	values []string
	n      int
}

// next returns a new canary; high-entropy ones look like random tokens.
func (c *canaries) next() string {
	c.n++
	v := fmt.Sprintf("cnry%02d-x7Qp", c.n)
	c.values = append(c.values, v)
	return v
}

func (c *canaries) token() string {
	c.n++
	v := fmt.Sprintf("Zq8vN3xLp0Rt7YwK2mHs9DcF4gJb%02d", c.n)
	c.values = append(c.values, v)
	return v
}

// out collects every stdout and stderr of the sweep.
type sweepOutput struct{ all strings.Builder }

func (s *sweepOutput) run(t *testing.T, u *user, want int, args ...string) string {
	t.Helper()
	out, errOut, code := u.run("kubectl", append([]string{"gitops"}, args...)...)
	s.all.WriteString(out)
	s.all.WriteString(errOut)
	if code != want {
		t.Fatalf("kubectl gitops %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out, errOut)
	}
	return out + errOut
}

// TestCanarySweep puts canary secrets through each patch type, env vars by
// index and by name, args, URLs, a Secret target, ConfigMap keys named like
// credentials, the reason, the incident, a --patch-file in YAML, dry runs
// and a rejected patch, and asserts that none appears in any ConfigMap or
// Application of the cluster (but the patched ConfigMap itself), in any
// request Jira received, or in anything the commands printed.
func TestCanarySweep(t *testing.T) {
	e := environment(t)
	ctx := context.Background()
	const app = "rd-sweep"
	if _, err := e.Git.Commit("secret for "+app, map[string]string{"apps/" + app + "/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: web-secret\n  namespace: " + app + "\nstringData:\n  username: web\n"}); err != nil {
		t.Fatal(err)
	}
	deployApp(t, app)
	grantOncall(t, app, "configmaps", "secrets")
	d := startJira(t)
	token, err := e.ArgoToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oncall := newUser(t, env.Oncall.Name, jiraEnv(d.URL, jiraToken,
		"ARGOCD_SERVER="+e.ArgoServerAddr, "ARGOCD_AUTH_TOKEN="+token, "ARGOCD_OPTS=--plaintext")...)
	var c canaries
	var s sweepOutput

	// 1. A strategic patch from a YAML file: env by name, a URL with a
	// password, secret args in both spellings; a token-shaped reason and a
	// password in the incident.
	patchFile := filepath.Join(t.TempDir(), "patch.yaml")
	yaml := fmt.Sprintf(`spec:
  template:
    spec:
      containers:
      - name: web
        env:
        - name: DB_PASSWORD
          value: %s
        - name: DATABASE_URL
          value: postgres://app:%s@db.internal:5432/orders
        - name: LOG_LEVEL
          value: info
        args: ["--serve", "--db-password=%s", "--token", "%s"]
`, c.next(), c.next(), c.next(), c.next())
	if err := os.WriteFile(patchFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	// The secret check refuses such text, changing nothing; confirmed, it
	// is written redacted.
	typed := []string{"breakglass", app, "deployment/web", "--patch-file", patchFile,
		"--reason", "rotating after leak of " + c.token(), "--incident", "INC-9 password=" + c.next(), "-y"}
	s.run(t, oncall, 2, typed...)
	s.run(t, oncall, 0, append(typed, "--allow-secret-text")...)

	// 2. A JSON patch by list index: the env var named like a password and
	// the argument after --token, within the same session.
	jsonPatch := fmt.Sprintf(`[{"op":"replace","path":"/spec/template/spec/containers/0/env/0/value","value":"%s"},`+
		`{"op":"replace","path":"/spec/template/spec/containers/0/args/3","value":"%s"},`+
		`{"op":"replace","path":"/spec/template/spec/containers/0/env/1/value","value":"mysql://root:%s@db/x"}]`, c.next(), c.next(), c.next())
	for _, format := range []string{"json", "yaml", "text"} {
		s.run(t, oncall, 0, "breakglass", app, "deployment/web", "--type", "json", "--patch", jsonPatch, "--reason", "dry "+format, "--join", "--dry-run", "-o", format)
	}
	s.run(t, oncall, 0, "breakglass", app, "deployment/web", "--type", "json", "--patch", jsonPatch, "--reason", "by index", "--join", "-y")

	// 3. A merge patch of a ConfigMap key named like a credential.
	clientSecret := c.next()
	s.run(t, oncall, 0, "breakglass", app, "configmap/web-config", "--type", "merge",
		"--patch", fmt.Sprintf(`{"data":{"client-secret":"%s","greeting":"hi"}}`, clientSecret), "--reason", "config", "--join", "-y")

	// 3b. Config files in a ConfigMap, where secrets hide in shapes no
	// pattern knows: a YAML block scalar, XML, .NET's appSettings, INI,
	// properties, .env and JSON text. The live file already holds a secret
	// on a line the patch does not touch: neither may reach a record.
	liveSecret := c.next()
	admin := newUser(t, env.Admin.Name)
	admin.kubectl("-n", app, "patch", "configmap", "web-config", "--type", "merge", "-p",
		fmt.Sprintf(`{"data":{"app.ini":"[db]\nhost = db\npassword = %s\ntimeout = 5\n"}}`, liveSecret))
	files := map[string]string{
		"app.yaml":       "db:\n  host: db\n  password: |\n    " + c.next() + "\n",
		"app.xml":        "<config>\n  <password>" + c.next() + "</password>\n</config>\n",
		"web.config":     "<appSettings>\n  <add key=\"DbPassword\" value=\"" + c.next() + "\"/>\n</appSettings>\n",
		"app.ini":        "[db]\nhost = db\npassword = " + liveSecret + "\ntimeout = 9\n",
		"app.properties": "db.host=db\ndb.pass=" + c.next() + "\n",
		".env":           "export ADMIN_PIN=" + c.next() + "\nSTRIPE_KEY=" + c.next() + "\n",
		"app.json":       `{"db": {"\u0070assword": "` + c.next() + `"}}`,
	}
	filesPatch, _ := json.Marshal(map[string]any{"data": files})
	s.run(t, oncall, 0, "breakglass", app, "configmap/web-config", "--type", "merge", "--patch", string(filesPatch), "--reason", "config files", "--join", "-y")

	// 3c. An env var named like nothing a rule knows, and the short -p
	// flag of mysql and redis-cli, inside sh -c too.
	s.run(t, oncall, 0, "breakglass", app, "deployment/web", "--patch", fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"web",`+
		`"env":[{"name":"MYSQL_ROOT_PW","value":"%s"}],"args":["-p","%s"],"command":["sh","-c","mysql -p%s"]}]}}}}`, c.next(), c.next(), c.next()),
		"--reason", "shapes", "--join", "-y")

	// 4. A Secret target: every value is secret, whatever its key.
	s.run(t, oncall, 0, "breakglass", app, "secret/web-secret",
		"--patch", fmt.Sprintf(`{"stringData":{"username":"%s"}}`, c.next()), "--reason", "secret", "--join", "-y")

	// 5. A patch the API server rejects, quoting the value back.
	rejected := c.next()
	out := s.run(t, oncall, 1, "breakglass", app, "deployment/web", "--patch", `{"metadata":{"labels":{"api-token":"`+rejected+` !"}}}`, "--reason", "bad", "--join", "-y")
	if !strings.Contains(out, "server-side dry run") {
		t.Errorf("the rejection should say the server refused it: %s", out)
	}

	// What a responder and an auditor read afterwards.
	for _, args := range [][]string{
		{"status", app, "-o", "json"}, {"status", app, "-o", "yaml"}, {"status", app, "-o", "wide"},
		{"audit", "log", "-o", "json"}, {"audit", "log", "-o", "yaml"}, {"audit", "log", "-o", "csv"}, {"audit", "log", "-o", "wide"}, {"audit", "log", "-o", "jsonl"},
	} {
		s.run(t, oncall, 0, args...)
	}
	auditor := newUser(t, env.Auditor.Name)
	for _, r := range sessionRecords(t, sessionOf(t, app).ID) {
		s.run(t, auditor, 0, "audit", "show", r.ID, "-o", "json")
	}

	// The patched values are live: the sweep would prove nothing otherwise.
	cm, err := kubeFor(t, env.Admin.Name).CoreV1().ConfigMaps(app).Get(ctx, "web-config", metav1.GetOptions{})
	if err != nil || cm.Data["client-secret"] != clientSecret {
		t.Fatalf("the ConfigMap patch is not live: %v %v", cm.Data, err)
	}

	configMaps := admin.kubectl("get", "configmaps", "-A", "-o", "json")
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(configMaps), &list); err != nil {
		t.Fatal(err)
	}
	var stored strings.Builder
	for _, item := range list.Items {
		var meta struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		_ = json.Unmarshal(item, &meta)
		if meta.Metadata.Namespace == app && meta.Metadata.Name == "web-config" {
			continue // the target itself holds the value it was patched to
		}
		stored.Write(item)
	}
	stored.WriteString(admin.kubectl("get", "applications.argoproj.io", "-A", "-o", "json"))
	var jira strings.Builder
	for _, r := range d.Requests() {
		jira.WriteString(r.Body + r.Query.Encode())
	}
	if len(d.Issues()) != 1 {
		t.Errorf("%d Jira issues, want 1", len(d.Issues()))
	}
	for _, v := range c.values {
		for where, text := range map[string]string{"a ConfigMap or Application": stored.String(), "a Jira request": jira.String(), "command output": s.all.String()} {
			if strings.Contains(text, v) {
				t.Errorf("canary %s reached %s", v, where)
			}
		}
	}
	if !strings.Contains(s.all.String(), "[REDACTED]") || !strings.Contains(stored.String(), "[REDACTED]") {
		t.Errorf("no redaction marker: the sweep did not exercise redaction")
	}
	// The patch file as given is in its record as a keyed digest only: no
	// plain SHA-256 anyone could test guesses against, none in Jira, and
	// README's recipe checks it with the key.
	data, _ := os.ReadFile(patchFile)
	if strings.Contains(stored.String(), sha256Hex(data)) || strings.Contains(jira.String(), sha256Hex(data)) {
		t.Errorf("the plain SHA-256 of the patch file reached a record or Jira")
	}
	mac := hmacHex(e.DigestKey, data)
	if !strings.Contains(stored.String(), mac) || strings.Contains(jira.String(), mac) {
		t.Errorf("the records lack the keyed digest of the patch file, or Jira has it")
	}
	planned := sessionRecords(t, sessionOf(t, app).ID)[0]
	recipe := fmt.Sprintf(`openssl dgst -sha256 -hmac "$KEY" %s | awk '{print $NF}'; kubectl gitops audit show %s -o json | jq -r .patch.hmac`, patchFile, planned.ID)
	out, errOut, code := auditor.run("sh", "-c", "KEY=$(kubectl -n "+e.ArgoNamespace+" get secret kubectl-gitops-digest-key -o jsonpath='{.data.key\\.1}' | base64 -d); "+recipe)
	if lines := strings.Fields(out); code != 0 || len(lines) != 2 || lines[0] != lines[1] || lines[0] != mac {
		t.Errorf("README's recipe as the auditor: exit %d, %q (%s), want the record's keyed digest %s twice", code, out, errOut, mac)
	}
	// Names, and what changed where in a file, stay readable.
	for _, keep := range []string{"DB_PASSWORD", "LOG_LEVEL", "MYSQL_ROOT_PW", "client-secret", "changed line 4: keys timeout"} {
		if !strings.Contains(s.all.String(), keep) {
			t.Errorf("%q was redacted too", keep)
		}
	}
}

// TestImageRefusesUnknownContainers: kubectl set image refuses a container
// the workload does not have; a strategic merge would add one instead.
func TestImageRefusesUnknownContainers(t *testing.T) {
	environment(t)
	deployApp(t, "rd-image")
	oncall := newUser(t, env.Oncall.Name)
	_, errOut := mustRun(t, oncall, 1, "breakglass", "rd-image", "deployment/web", "--image", "wbe=registry.example/web:2", "--reason", "typo", "-y")
	if !strings.Contains(errOut, `container wbe, which deployment.apps/web does not have (it has web)`) {
		t.Errorf("stderr %q should name the containers that exist", errOut)
	}
	d, err := kubeFor(t, env.Admin.Name).AppsV1().Deployments("rd-image").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil || len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("the Deployment changed: %v", err)
	}
	if a, _ := appsClient(t).Get(context.Background(), "rd-image", metav1.GetOptions{}); a.GetAnnotations()[breakglass.SessionAnnotation] != "" {
		t.Errorf("a session was opened")
	}
}

// TestLargePatchKeepsTheSessionSmall: a value of a few hundred KB used to
// overflow the session annotation, losing the patch and letting a plain
// restore revert the fix. Now the session keeps digests, and a patch too
// large to record is refused before any change.
func TestLargePatchKeepsTheSessionSmall(t *testing.T) {
	environment(t)
	deployApp(t, "rd-large")
	grantOncall(t, "rd-large", "configmaps")
	oncall := newUser(t, env.Oncall.Name)
	big := strings.Repeat("0123456789abcdef", 300<<10/16)
	mustRun(t, oncall, 0, "breakglass", "rd-large", "configmap/web-config", "--type", "merge",
		"--patch-file", writeFile(t, `{"data":{"blob":"`+big+`"}}`), "--reason", "large", "-y")
	a, err := appsClient(t).Get(context.Background(), "rd-large", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	value := a.GetAnnotations()[breakglass.SessionAnnotation]
	if len(value) > 4<<10 {
		t.Errorf("session annotation is %d bytes", len(value))
	}
	session, err := breakglass.ParseSession(value)
	if err != nil || len(session.Patches) != 1 || len(session.Patches[0].Fields) != 1 || session.Patches[0].Fields[0].Path != "/data/blob" {
		t.Fatalf("the session lost the patch: %v %+v", err, session)
	}
	st := statusJSON(t, oncall, "rd-large")
	if st.Ready || st.Git == breakglass.GitCaughtUp {
		t.Errorf("status says ready while Git has not moved: %+v", st)
	}
	_, errOut, code := oncall.run("kubectl", "gitops", "restore", "rd-large", "-y")
	if code != 1 || !strings.Contains(errOut, "git has not caught up") {
		t.Errorf("a plain restore: exit %d, %s", code, errOut)
	}

	// A file of 600 KiB used to make its record too large to store, and
	// the break-glass was refused; a file is recorded by its structure now,
	// so the record stays small whatever the file.
	deployApp(t, "rd-huge")
	grantOncall(t, "rd-huge", "configmaps")
	huge := strings.Repeat("0123456789abcdef\n", 600<<10/17)
	mustRun(t, oncall, 0, "breakglass", "rd-huge", "configmap/web-config", "--type", "merge",
		"--patch-file", writeFile(t, `{"data":{"blob":"`+huge+`"}}`), "--reason", "huge", "-y")
	for _, r := range sessionRecords(t, sessionOf(t, "rd-huge").ID) {
		if b, _ := json.Marshal(r); len(b) > 8<<10 {
			t.Errorf("record %d (%s) is %d bytes", r.Seq, r.Event, len(b))
		}
	}
	mustRun(t, oncall, 0, "restore", "rd-huge", "--force", "--reason", "test over", "-y")
}
