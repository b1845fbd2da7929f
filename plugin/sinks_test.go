package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/ticket"
)

// sinkTickets is a Jira that keeps everything it is sent, rendered as the
// real one renders it.
type sinkTickets struct {
	fakeTickets
	sent strings.Builder
}

func (j *sinkTickets) Create(ctx context.Context, rc ticket.Reconcile) (ticket.Issue, error) {
	j.sent.WriteString(ticket.Summary(rc) + ticket.Description(rc) + ticket.PatchComment(rc))
	return j.fakeTickets.Create(ctx, rc)
}

func (j *sinkTickets) Comment(ctx context.Context, key, body string) error {
	j.sent.WriteString(body)
	return j.fakeTickets.Comment(ctx, key, body)
}

func (j *sinkTickets) Close(ctx context.Context, key, comment string) error {
	j.sent.WriteString(comment)
	return j.fakeTickets.Close(ctx, key, comment)
}

// TestNoCanaryReachesAnySink plants canaries where issue #33 found secrets
// (a webhook URL and an API key in pod-template annotations, a probe path
// with ?key=, an env value, args) in the live Deployment and in a patch,
// and confirmed ones in the reason and incident; then drives a break-glass
// (dry run in every format, the patch, status, every audit log format,
// audit show, a forced restore) and asserts that none reaches stdout,
// stderr, the audit records, the Application, its Events or Jira.
func TestNoCanaryReachesAnySink(t *testing.T) {
	f := newFakeCluster(t)
	jira := &sinkTickets{}
	f.tickets = jira
	var canaries []string
	canary := func() string {
		c := fmt.Sprintf("cnry%02dQx", len(canaries))
		canaries = append(canaries, c)
		return c
	}
	hook := "https://hooks.example.com/services/T1/B2/" + canary()
	live, err := f.dyn.Resource(deploymentsGVR).Namespace("demo").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var template map[string]any
	_ = json.Unmarshal([]byte(`{"metadata":{"annotations":{"notify.example.com/webhook":"`+hook+`","monitoring.example.com/key":"`+canary()+`0123456789abcdef"}},
		"spec":{"containers":[{"name":"web","image":"registry.example/web:1.0.0","args":["--url","`+canary()+`"],
		"env":[{"name":"LOG_LEVEL","value":"`+canary()+`"}],
		"livenessProbe":{"periodSeconds":10,"httpGet":{"port":8080,"path":"/healthz?key=`+canary()+`"}}}]}}`), &template)
	live.Object["spec"].(map[string]any)["template"] = template
	if _, err := f.dyn.Resource(deploymentsGVR).Namespace("demo").Update(context.Background(), live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	patch := fmt.Sprintf(`{"metadata":{"annotations":{"example.com/api-key":"%s"}},"spec":{"replicas":3,"template":{"metadata":{"annotations":{"notify.example.com/webhook":"https://hooks.example.com/services/T1/B2/%s"}},"spec":{"containers":[{"name":"web","image":"registry.example/web:1.0.1","env":[{"name":"LOG_LEVEL","value":"%s"}]}]}}}}`,
		canary(), canary(), canary())
	typed := []string{"--reason", "roll back; pw=" + canary(), "--incident", "INC-7 password is " + canary(), "--allow-secret-text"}
	var printed strings.Builder
	run := func(want int, args ...string) {
		t.Helper()
		code, out, errOut := runPlugin(t, args...)
		printed.WriteString(out + errOut)
		if code != want {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, want, out, errOut)
		}
	}
	change := append([]string{"breakglass", "web", "deployment/web", "--patch", patch}, typed...)
	for _, format := range []string{"text", "json", "yaml"} {
		run(ExitOK, append(change, "--dry-run", "-o", format)...)
	}
	run(ExitOK, append(change, "-y")...)
	for _, format := range []string{"json", "yaml", "wide"} {
		run(ExitOK, "status", "web", "-o", format)
	}
	for _, format := range []string{"json", "yaml", "csv", "wide", "jsonl"} {
		run(ExitOK, "audit", "log", "--file", f.audit.Path, "-o", format)
	}
	for _, r := range records(t, f) {
		run(ExitOK, "audit", "show", "--file", f.audit.Path, r.ID, "-o", "json")
	}
	run(ExitOK, "restore", "web", "--force", "--reason", "abandoned, the password is "+canary(), "--allow-secret-text", "-y")

	stored, err := os.ReadFile(f.audit.Path)
	if err != nil {
		t.Fatal(err)
	}
	app, _ := json.Marshal(f.app().Object)
	events, err := f.kube.CoreV1().Events("argocd").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventText, _ := json.Marshal(events)
	sinks := map[string]string{"stdout or stderr": printed.String(), "an audit record": string(stored), "the Application": string(app),
		"an Event": string(eventText), "Jira": jira.sent.String()}
	for _, c := range canaries {
		for where, text := range sinks {
			if strings.Contains(text, c) {
				t.Errorf("canary %s reached %s", c, where)
			}
		}
	}
	// The sweep saw the values it must keep, and the redaction.
	for _, keep := range []string{"registry.example/web:1.0.1", audit.Redacted, "textCheck"} {
		if !strings.Contains(string(stored), keep) {
			t.Errorf("the records lack %s", keep)
		}
	}
	if len(events.Items) == 0 || jira.sent.Len() == 0 {
		t.Errorf("%d events, %d bytes to Jira: the sweep did not reach every sink", len(events.Items), jira.sent.Len())
	}
	if _, open := f.app().GetAnnotations()[breakglass.SessionAnnotation]; open {
		t.Error("the session is still open")
	}
}
