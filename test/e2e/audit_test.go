//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

const appenderEnv = "KUBECTL_GITOPS_E2E_APPENDER"

// appenderMain appends records as one writer process: KUBECONFIG, the
// namespace, the writer's name and the count come from the environment.
func appenderMain() int {
	config, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	config.QPS, config.Burst = 200, 400
	store := audit.NewConfigMapStore(kubernetes.NewForConfigOrDie(config), os.Getenv("APPEND_NAMESPACE"))
	count, _ := strconv.Atoi(os.Getenv("APPEND_COUNT"))
	writer := os.Getenv(appenderEnv)
	for i := 0; i < count; i++ {
		// Each writer's records are a session of its own, opened by its
		// first: a log verify finds meaningful, not only linked.
		event := audit.EventPatched
		if i == 0 {
			event = audit.EventPlanned
		}
		r := &audit.Record{Event: event, Actor: audit.Actor{Username: "oncall"}, Session: writer, Application: &audit.AppRef{Namespace: "argocd", Name: writer},
			Reason: fmt.Sprintf("%s record %d", writer, i), Outcome: audit.Outcome{Status: audit.StatusSucceeded}}
		if err := store.Append(context.Background(), r); err != nil {
			fmt.Fprintf(os.Stderr, "%s: append %d: %v\n", writer, i, err)
			return 1
		}
	}
	return 0
}

func TestAuditConcurrentAppendersKeepOneChain(t *testing.T) {
	// A log of its own: the attack tests plant breaks in the shared one,
	// and the suite runs in any order.
	ns := auditNamespace(t, "concurrent")
	ctx := context.Background()
	const writers, each = 8, 50
	store := audit.NewConfigMapStore(kubeFor(t, env.Admin.Name), ns)
	before, err := store.Entries(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), appenderEnv+"=writer-"+strconv.Itoa(w), "KUBECONFIG="+testEnv.Kubeconfig(env.Oncall.Name),
				"APPEND_NAMESPACE="+ns, "APPEND_COUNT="+strconv.Itoa(each))
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[w] = fmt.Errorf("writer %d: %v: %s", w, err, out)
			}
		}(w)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	// A small page size proves listing follows limit/continue to the end.
	paged := &audit.ConfigMapStore{Client: kubeFor(t, env.Oncall.Name), Namespace: ns, PageSize: 7}
	rep, err := audit.VerifyStore(ctx, paged, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Intact() {
		t.Fatalf("chain broken after concurrent appends: %v", rep.Breaks)
	}
	if want := len(before) + writers*each; rep.Records != want || rep.Tip.Seq != uint64(want) || rep.Head.Seq != uint64(want) {
		t.Fatalf("%d records, tip %d, head %d; want %d of each", rep.Records, rep.Tip.Seq, rep.Head.Seq, want)
	}
	entries, _ := paged.Entries(ctx, audit.Filter{})
	seen := map[string]bool{}
	for _, r := range audit.Records(entries) {
		seen[r.Reason] = true
	}
	for w := 0; w < writers; w++ {
		for i := 0; i < each; i++ {
			if reason := fmt.Sprintf("writer-%d record %d", w, i); !seen[reason] {
				t.Errorf("lost record %q", reason)
			}
		}
	}

	// The command agrees.
	oncall := newUser(t, env.Oncall.Name)
	if out, errOut, code := oncall.run("kubectl", "gitops", "audit", "verify", "--audit-namespace", ns); code != 0 || !strings.Contains(out, fmt.Sprintf("chain intact: %d records", rep.Records)) {
		t.Errorf("audit verify: exit %d, %q %q", code, out, errOut)
	}
}

// readmeRecipe is the shell block the README marks as the auditor's
// verification recipe.
func readmeRecipe(t *testing.T) string {
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "audit.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "<!-- audit-recipe")
	if !ok {
		t.Fatal("README has no audit-recipe block")
	}
	_, rest, _ = strings.Cut(rest, "```sh\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("the README's audit-recipe block is not closed")
	}
	return block
}

// TestAuditExportVerifiesWithJqAndSha256sum runs the README's recipe, with
// the real jq and sha256sum, on a real export: it must find the chain
// intact, and find a record edited in the export.
func TestAuditExportVerifiesWithJqAndSha256sum(t *testing.T) {
	e := environment(t)
	store := audit.NewConfigMapStore(kubeFor(t, env.Oncall.Name), e.ArgoNamespace)
	for _, reason := range []string{"recipe: <b>é & 4.50", "recipe: line\nbreak \u2028 \"quoted\"", "recipe: third"} {
		if err := store.Append(context.Background(), &audit.Record{Event: audit.EventPlanned, Reason: reason, Actor: audit.Actor{Username: env.Oncall.Name}}); err != nil {
			t.Fatal(err)
		}
	}
	recipe := readmeRecipe(t)
	dir := t.TempDir()
	auditor := newUser(t, env.Auditor.Name)
	out, errOut, code := auditor.run("bash", "-c", "set -eo pipefail; cd "+dir+"\n"+recipe)
	if code != 0 || !strings.Contains(out, "every hash matches") || !strings.Contains(out, "every record links to the one before") {
		t.Fatalf("the README's recipe on a real export: exit %d\n%s\n%s", code, out, errOut)
	}
	export, err := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(export), `"schema":2`) || !strings.Contains(string(export), "recipe: third") {
		t.Fatalf("the export holds no schema 2 record of this test:\n%.2000s", export)
	}

	// An auditor's copy edited after export: the recipe, without the
	// export line, must say so.
	var checks []string
	for _, line := range strings.Split(recipe, "\n") {
		if !strings.HasPrefix(line, "kubectl gitops audit log") {
			checks = append(checks, line)
		}
	}
	edit := `jq -c 'if .reason == "recipe: third" then .reason = "recipe: edited" else . end' audit.jsonl > edited && mv edited audit.jsonl` + "\n"
	out, _, _ = auditor.run("bash", "-c", "cd "+dir+"\n"+edit+strings.Join(checks, "\n"))
	if strings.Contains(out, "every hash matches") || !strings.Contains(out, "every record links to the one before") || !regexp.MustCompile(`(?m)^< [0-9a-f]{64}$`).MatchString(out) {
		t.Errorf("the recipe did not name the edited record's hash alone:\n%s", out)
	}
}

// tamperChain writes n records into a namespace of their own and returns the
// admin user and that namespace.
func tamperChain(t *testing.T, name string, n int) (*user, string) {
	t.Helper()
	ctx := context.Background()
	kube := kubeFor(t, env.Admin.Name)
	ns := "tamper-" + name
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	store := audit.NewConfigMapStore(kube, ns)
	for i := 0; i < n; i++ {
		r := &audit.Record{Event: audit.EventPatched, Actor: audit.Actor{Username: "oncall"}, Reason: fmt.Sprintf("step %d", i+1), Outcome: audit.Outcome{Status: audit.StatusSucceeded}}
		if err := store.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	admin := newUser(t, env.Admin.Name)
	if out, errOut, code := admin.run("kubectl", "gitops", "audit", "verify", "--audit-namespace", ns); code != 0 {
		t.Fatalf("untampered chain: exit %d: %s %s", code, out, errOut)
	}
	return admin, ns
}

// recordJSON fetches a record ConfigMap as kubectl prints it.
func recordJSON(t *testing.T, u *user, ns string, seq uint64) map[string]any {
	t.Helper()
	var cm map[string]any
	if err := json.Unmarshal([]byte(u.kubectl("-n", ns, "get", "cm", audit.RecordName(seq), "-o", "json")), &cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

// replaceForce writes cm back the only way an immutable ConfigMap can be
// changed: delete and recreate.
func replaceForce(t *testing.T, u *user, cm map[string]any) {
	t.Helper()
	meta := cm["metadata"].(map[string]any)
	for _, k := range []string{"resourceVersion", "uid", "creationTimestamp", "managedFields"} {
		delete(meta, k)
	}
	path := filepath.Join(t.TempDir(), "cm.json")
	data, _ := json.Marshal(cm)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	u.kubectl("replace", "--force", "-f", path)
}

func TestAuditVerifyDetectsTampering(t *testing.T) {
	environment(t)
	withoutAuditPolicy(t)
	tests := []struct {
		name   string
		tamper func(t *testing.T, u *user, ns string)
		// want is what verify prints: a break, with exit 1, or a
		// warning about the head, with exit 0 (the chain is intact).
		want string
	}{
		{"delete", func(t *testing.T, u *user, ns string) {
			u.kubectl("-n", ns, "delete", "cm", audit.RecordName(3))
		}, "missing: record 3: deleted"},
		{"alter", func(t *testing.T, u *user, ns string) {
			cm := recordJSON(t, u, ns, 4)
			data := cm["data"].(map[string]any)
			data["record"] = strings.Replace(data["record"].(string), "step 4", "step 4 (nothing happened)", 1)
			replaceForce(t, u, cm)
		}, "altered: " + audit.RecordName(4) + ": content does not match its hash"},
		{"swap", func(t *testing.T, u *user, ns string) {
			two, three := recordJSON(t, u, ns, 2), recordJSON(t, u, ns, 3)
			two["data"], three["data"] = three["data"], two["data"]
			replaceForce(t, u, two)
			replaceForce(t, u, three)
		}, "reordered: " + audit.RecordName(2) + ": holds record 3"},
		{"insert", func(t *testing.T, u *user, ns string) {
			forged := recordJSON(t, u, ns, 3)
			forged["metadata"].(map[string]any)["name"] = audit.RecordName(3) + "-approved"
			replaceForce(t, u, forged)
		}, "inserted: " + audit.RecordName(3) + "-approved: not a position the tool writes records to"},
		{"roll back the head", func(t *testing.T, u *user, ns string) {
			var rec audit.Record
			data := recordJSON(t, u, ns, 4)["data"].(map[string]any)
			if err := json.Unmarshal([]byte(data["record"].(string)), &rec); err != nil {
				t.Fatal(err)
			}
			u.kubectl("-n", ns, "patch", "cm", audit.HeadName, "--type=merge", "-p", `{"data":{"seq":"4","hash":"`+rec.Hash+`"}}`)
		}, "warning: head-behind: head: the head names record 4 but the log goes on to record 6"},
		// Where the admission policies are not installed (this namespace),
		// verify still names what they would have refused.
		{"strip the label", func(t *testing.T, u *user, ns string) {
			u.kubectl("-n", ns, "label", "cm", audit.RecordName(5), audit.LabelKind+"-")
		}, "unlabelled: " + audit.RecordName(5) + ": its kubectl-gitops.io/audit=record label was removed"},
		{"relabel", func(t *testing.T, u *user, ns string) {
			u.kubectl("-n", ns, "label", "cm", audit.RecordName(3), audit.LabelEvent+"=breakglass.forced", "--overwrite")
		}, `relabelled: ` + audit.RecordName(3) + `: label kubectl-gitops.io/event is "breakglass.forced", the record says "breakglass.patched"`},
		{"make mutable", func(t *testing.T, u *user, ns string) {
			cm := recordJSON(t, u, ns, 4)
			cm["immutable"] = false
			replaceForce(t, u, cm)
		}, "mutable: " + audit.RecordName(4) + ": the ConfigMap is not immutable"},
		{"forge the actor", func(t *testing.T, u *user, ns string) {
			u.kubectl("-n", ns, "annotate", "cm", audit.RecordName(2), audit.AnnotationActor+"=admin", "--overwrite")
		}, `forged: ` + audit.RecordName(2) + `: the record names "oncall" as its actor, but it was created by "admin"`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			admin, ns := tamperChain(t, strconv.Itoa(i), 6)
			tt.tamper(t, admin, ns)
			want := 1
			if strings.HasPrefix(tt.want, "warning: ") {
				want = 0
			}
			out, errOut, code := admin.run("kubectl", "gitops", "audit", "verify", "--audit-namespace", ns)
			if code != want || !strings.Contains(out, tt.want) {
				t.Errorf("audit verify after %s: exit %d, stdout:\n%s\nstderr: %s\nwant exit %d and %q", tt.name, code, out, errOut, want, tt.want)
			}
		})
	}
}

func TestAuditRBAC(t *testing.T) {
	apiOnly(t)
	e := environment(t)
	ctx := context.Background()
	oncallStore := audit.NewConfigMapStore(kubeFor(t, env.Oncall.Name), e.ArgoNamespace)
	rec := &audit.Record{Event: audit.EventPlanned, Actor: audit.Actor{Username: "oncall"}, Reason: "rbac check", Outcome: audit.Outcome{Status: audit.StatusStarted}}
	if err := oncallStore.Append(ctx, rec); err != nil {
		t.Fatalf("oncall cannot append with the shipped role: %v", err)
	}
	name := audit.RecordName(rec.Seq)

	auditor := newUser(t, env.Auditor.Name)
	if out, errOut, code := auditor.run("kubectl", "gitops", "audit", "log", "--event", "breakglass.planned"); code != 0 || !strings.Contains(out, rec.ID) {
		t.Errorf("auditor audit log: exit %d, %q %q", code, out, errOut)
	}
	if out, _, code := auditor.run("kubectl", "gitops", "audit", "show", rec.ID); code != 0 || !strings.Contains(out, "reason: rbac check") {
		t.Errorf("auditor audit show: exit %d, %q", code, out)
	}
	auditorStore := audit.NewConfigMapStore(kubeFor(t, env.Auditor.Name), e.ArgoNamespace)
	if err := auditorStore.Append(ctx, &audit.Record{Event: audit.EventPlanned}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("auditor appended a record: %v", err)
	}

	oncall := newUser(t, env.Oncall.Name)
	if _, errOut, code := oncall.run("kubectl", "-n", e.ArgoNamespace, "delete", "cm", name); code == 0 || !strings.Contains(errOut, "forbidden") {
		t.Errorf("oncall deleted a record: exit %d %s", code, errOut)
	}
	if _, errOut, code := oncall.run("kubectl", "-n", e.ArgoNamespace, "patch", "cm", name, "--type=merge", "-p", `{"data":{"record":"{}"}}`); code == 0 || !strings.Contains(errOut, "forbidden") {
		t.Errorf("oncall rewrote a record: exit %d %s", code, errOut)
	}
	// Even a writer allowed to update ConfigMaps cannot rewrite a record.
	admin := newUser(t, env.Admin.Name)
	if _, errOut, code := admin.run("kubectl", "-n", e.ArgoNamespace, "patch", "cm", name, "--type=merge", "-p", `{"data":{"record":"{}"}}`); code == 0 || !strings.Contains(errOut, "immutable") {
		t.Errorf("a record ConfigMap is not immutable: exit %d %s", code, errOut)
	}

	nobody := newUser(t, env.Nobody.Name)
	_, errOut, code := nobody.run("kubectl", "gitops", "audit", "log")
	if code != 1 || !strings.HasPrefix(errOut, "error: not allowed to read the audit log in namespace argocd: bind the kubectl-gitops auditor role") {
		t.Errorf("nobody audit log: exit %d, %q", code, errOut)
	}
	if _, errOut, code := nobody.run("kubectl", "gitops", "audit", "verify"); code != 3 || !strings.Contains(errOut, "not allowed to read the audit log") {
		t.Errorf("nobody audit verify: exit %d, %q; want 3", code, errOut)
	}
}

func TestAuditRecordsNeverHoldSecrets(t *testing.T) {
	e := environment(t)
	store := audit.NewConfigMapStore(kubeFor(t, env.Oncall.Name), e.ArgoNamespace)
	records := []*audit.Record{
		{Event: audit.EventPatched, Target: &audit.Target{Version: "v1", Kind: "Secret", Namespace: "demo", Name: "db"},
			Patch:   &audit.Patch{Type: "merge", Body: `{"stringData":{"password":"correct-horse-battery"}}`},
			Changes: []audit.Change{{Path: "/data/password", Before: "b2xk", After: "Y29ycmVjdC1ob3JzZS1iYXR0ZXJ5"}}},
		{Event: audit.EventPatched, Target: &audit.Target{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "demo", Name: "web"},
			Patch:  &audit.Patch{Type: "strategic", Body: `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"API_TOKEN","value":"correct-horse-battery"}]}]}}}}`},
			Reason: "rotate, was Bearer abcdefghijklmnop.qrstuvwx"},
	}
	for _, r := range records {
		r.Actor = audit.Actor{Username: env.Oncall.Name}
		r.Outcome = audit.Outcome{Status: audit.StatusSucceeded}
		if err := store.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	admin := newUser(t, env.Admin.Name)
	raw := admin.kubectl("-n", e.ArgoNamespace, "get", "cm", "-l", audit.RecordSelector, "-o", "json")
	shown, _, _ := admin.run("kubectl", "gitops", "audit", "log", "-o", "json")
	for _, secret := range []string{"correct-horse-battery", "Y29ycmVjdC1ob3JzZS1iYXR0ZXJ5", "abcdefghijklmnop.qrstuvwx"} {
		if strings.Contains(raw, secret) || strings.Contains(shown, secret) {
			t.Errorf("secret %q reached the audit log", secret)
		}
	}
	if !strings.Contains(raw, audit.Redacted) {
		t.Errorf("no redaction marker in the stored records")
	}
}

// withoutAuditPolicy lifts the audit-log policy's binding (bound in every
// namespace) for the test: verify must name what the policy would have
// refused, on a cluster without it. The binding is put back, and enforced
// again, when the test ends (the suite runs no test in parallel).
func withoutAuditPolicy(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
	bindings := kubeDynamic(t).Resource(gvr)
	binding, err := bindings.Get(ctx, "kubectl-gitops-audit-log", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := bindings.Delete(ctx, binding.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	probe := func() error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubectl-gitops-audit-probe", Namespace: testEnv.ArgoNamespace}}
		_, err := kubeFor(t, env.Admin.Name).CoreV1().ConfigMaps(testEnv.ArgoNamespace).Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	wait := func(what string, done func(error) bool) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		waitFor(ctx, t, what, func() (bool, string) {
			err := probe()
			return done(err), fmt.Sprint(err)
		})
	}
	wait("the audit-log policy to be lifted", func(err error) bool { return err == nil })
	t.Cleanup(func() {
		binding.SetResourceVersion("")
		binding.SetUID("")
		binding.SetCreationTimestamp(metav1.Time{})
		binding.SetManagedFields(nil)
		if _, err := bindings.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		wait("the audit-log policy to be enforced again", func(err error) bool { return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) })
	})
}

// TestAuditHeadCannotRunAway: the on-call group moves the head at most
// 1000 records a request, but as often as it likes, and nobody could move
// it back: a head sent far past the log stayed there, every append listed
// the namespace and verify exited 1 for good. Now, with the head moved
// ahead through kubectl again and again, a break-glass still writes its
// records at the log's end (each command noting the head once), verify warns of the
// head and exits 0, the on-call user's repair-head is refused by the API
// server, a cluster admin's puts the head back (recorded) and verify is
// clean, and a lost head cannot be created far ahead either.
func TestAuditHeadCannotRunAway(t *testing.T) {
	ctx := context.Background()
	ns := auditNamespace(t, "runaway")
	oncall, admin := newUser(t, env.Oncall.Name), newUser(t, env.Admin.Name)
	store := func() *audit.ConfigMapStore { return audit.NewConfigMapStore(kubeFor(t, env.Admin.Name), ns) }
	headIn := func() audit.HeadState {
		t.Helper()
		h, err := store().Head(ctx)
		if err != nil || h == nil {
			t.Fatalf("reading the head in %s: %v", ns, err)
		}
		return *h
	}
	records := func() []*audit.Record {
		t.Helper()
		entries, err := store().Entries(ctx, audit.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		return audit.Records(entries)
	}
	tip := headIn()
	for i := uint64(1); i <= 5; i++ {
		oncall.kubectl("-n", ns, "patch", "cm", audit.HeadName, "--type=merge", "-p", fmt.Sprintf(`{"data":{"seq":"%d"}}`, tip.Seq+1000*i))
	}
	far := headIn()
	if far.Seq != tip.Seq+5000 {
		t.Fatalf("the head is at %d, want %d", far.Seq, tip.Seq+5000)
	}

	// Appends still land at the log's end.
	deployApp(t, "ha-runaway")
	mustRun(t, oncall, 0, "breakglass", "ha-runaway", "deployment/web", "--replicas", "3", "--reason", "the head is far ahead", "-y", "--audit-namespace", ns)
	mustRun(t, oncall, 0, "restore", "ha-runaway", "--force", "--reason", "test over", "-y", "--audit-namespace", ns)
	recs := records()
	noted := 0
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d is at position %d: the log skipped ahead", r.Seq, i+1)
		}
		if r.HeadFound != nil {
			noted++
			if *r.HeadFound != far {
				t.Errorf("record %d noted the head %+v, want %+v", r.Seq, *r.HeadFound, far)
			}
		}
	}
	// Each command notes the head in its first record, no more.
	if first := recs[tip.Seq]; len(recs) < int(tip.Seq)+3 || first.Prev != tip.Hash || first.HeadFound == nil || noted > 2 {
		t.Errorf("%d records, record %d linking to %.12s noting the head %+v, %d noting it; want the break-glass at the log's end linking to %.12s, noting the head, once per command",
			len(recs), first.Seq, first.Prev, first.HeadFound, noted, tip.Hash)
	}
	if h := headIn(); h != far {
		t.Errorf("a writer moved the head from %+v to %+v", far, h)
	}
	end := recs[len(recs)-1]

	out, errOut, code := oncall.run("kubectl", "gitops", "audit", "verify", "--audit-namespace", ns)
	warned := fmt.Sprintf("warning: head-ahead: head: the head names record %d but the log ends at record %d", far.Seq, end.Seq)
	if code != 0 || !strings.Contains(out, warned) || !strings.Contains(out, "(fix: kubectl gitops audit repair-head (a cluster admin))") || !strings.Contains(out, "chain intact") {
		t.Errorf("audit verify: exit %d, stdout:\n%s\nstderr: %s\nwant exit 0 and %q with its fix", code, out, errOut, warned)
	}

	// The on-call user can neither repair it nor move it back.
	_, errOut, code = oncall.run("kubectl", "gitops", "audit", "repair-head", "--audit-namespace", ns, "--yes")
	if code != 1 || strings.Count(errOut, "never lets repair the audit head") != 1 || !strings.Contains(errOut, "nothing was changed") ||
		!strings.Contains(errOut, "`kubectl gitops audit repair-head --audit-namespace "+ns+"`") {
		t.Errorf("on-call repair-head: exit %d, %s", code, errOut)
	}
	back := fmt.Sprintf(`{"data":{"seq":"%d","hash":"%s"}}`, end.Seq, end.Hash)
	if _, errOut, code := oncall.run("kubectl", "-n", ns, "patch", "cm", audit.HeadName, "--type=merge", "-p", back); code == 0 || !strings.Contains(errOut, "the audit head only moves forward") {
		t.Errorf("on-call moved the head back: exit %d, %s", code, errOut)
	}
	if h, n := headIn(), len(records()); h != far || n != len(recs) {
		t.Fatalf("after the refusals the head is %+v and the log has %d records; want %+v and %d", h, n, far, len(recs))
	}

	// A cluster admin repairs it; verify is clean, the repair recorded.
	out, errOut = mustRun(t, admin, 0, "audit", "repair-head", "--audit-namespace", ns, "--yes", "-o", "json")
	var repair struct {
		Repaired bool          `json:"repaired"`
		Record   *audit.Record `json:"record"`
	}
	if err := json.Unmarshal([]byte(out), &repair); err != nil || !repair.Repaired || repair.Record == nil {
		t.Fatalf("admin repair-head: %v: %s %s", err, out, errOut)
	}
	if r := repair.Record; r.Event != audit.EventHeadRepaired || r.Seq != end.Seq+1 || r.Prev != end.Hash || r.HeadBefore == nil || *r.HeadBefore != far || r.Actor.Username != env.Admin.Name {
		t.Errorf("the repair record: %s", out)
	}
	if h := headIn(); h.Seq != repair.Record.Seq || h.Hash != repair.Record.Hash {
		t.Errorf("the head after the repair is %+v, want record %d", h, repair.Record.Seq)
	}
	out, errOut, code = oncall.run("kubectl", "gitops", "audit", "verify", "--audit-namespace", ns)
	if code != 0 || strings.Contains(out, "warning") || !strings.Contains(out, fmt.Sprintf("chain intact: %d records", repair.Record.Seq)) {
		t.Errorf("audit verify after the repair: exit %d, stdout:\n%s\nstderr: %s", code, out, errOut)
	}
	if out, _ := mustRun(t, oncall, 0, "audit", "log", "--audit-namespace", ns, "--event", string(audit.EventHeadRepaired)); !strings.Contains(out, repair.Record.ID) {
		t.Errorf("audit log does not list the repair:\n%s", out)
	}

	// A head the on-call group creates starts near the beginning, and the
	// tool's own append still creates it where the log ends.
	admin.kubectl("-n", ns, "delete", "cm", audit.HeadName)
	handmade := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": audit.HeadName, "namespace": ns, "labels": map[string]any{audit.LabelKind: "head"}},
		"data":     map[string]any{"seq": "5000", "hash": end.Hash}}
	if errOut, code := applyAs(t, oncall, handmade); code == 0 || !strings.Contains(errOut, "the audit head is created at record 1000 at most") {
		t.Errorf("on-call created the head at 5000: exit %d, %s", code, errOut)
	}
	r := &audit.Record{Event: audit.EventPatched, Actor: audit.Actor{Username: env.Oncall.Name}, Reason: "after the head was lost", Outcome: audit.Outcome{Status: audit.StatusSucceeded}}
	if err := audit.NewConfigMapStore(kubeFor(t, env.Oncall.Name), ns).Append(ctx, r); err != nil {
		t.Fatal(err)
	}
	if h := headIn(); r.Seq != repair.Record.Seq+1 || h.Seq != r.Seq || h.Hash != r.Hash {
		t.Errorf("the append after the head was lost wrote record %d and left the head at %+v; want record %d, named by the head", r.Seq, h, repair.Record.Seq+1)
	}
	if out, errOut, code := oncall.run("kubectl", "gitops", "audit", "verify", "--audit-namespace", ns); code != 0 || strings.Contains(out, "warning") {
		t.Errorf("audit verify at the end: exit %d, stdout:\n%s\nstderr: %s", code, out, errOut)
	}
}
