// Command demo runs the break-glass story on a real test environment for a
// newcomer (`make demo`): a self-healing Application, a live fix and its
// Jira ticket (filed in a local Jira test double), the fix proposed to Git
// as a pull request (in a local GitHub test double), the request merged
// and the controller restoring sync by itself, the ticket closed,
// narrating each step. No one edits Git by hand. It leaves the environment
// running, with a KUBECONFIG to explore, until Ctrl-C.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
	"github.com/kubectl-gitops/kubectl-gitops/test/gitdouble"
	"github.com/kubectl-gitops/kubectl-gitops/test/jiradouble"
)

// demoDouble reports a request a vendor's double does not implement.
type demoDouble string

func (demoDouble) Helper() {}
func (d demoDouble) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, string(d)+" double: "+format+"\n", args...)
}

// showTicket prints what the Jira double holds for the demo's ticket.
func showTicket(jira *jiradouble.Server) {
	for _, i := range jira.Issues() {
		fmt.Printf("Jira %s [%s] %s\n", i.Key, i.Status, i.Summary)
		for _, line := range strings.Split(i.Description, "\n") {
			if strings.HasPrefix(line, "* container") || strings.HasPrefix(line, "kustomize edit") || strings.HasPrefix(line, "||Reason") {
				fmt.Println("  " + line)
			}
		}
		for _, c := range i.Comments {
			fmt.Println("  comment: " + c)
		}
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// step prints a numbered heading, in bold on a terminal unless NO_COLOR.
func step(n int, text string) {
	if _, noColor := os.LookupEnv("NO_COLOR"); !noColor && term.IsTerminal(int(os.Stdout.Fd())) {
		fmt.Printf("\n\033[1m%d. %s\033[0m\n", n, text)
		return
	}
	fmt.Printf("\n%d. %s\n", n, text)
}

// demoShell runs commands the way the on-call engineer would type them.
type demoShell struct {
	env []string
}

func (s demoShell) run(args ...string) error {
	fmt.Printf("$ %s\n", strings.Join(args, " "))
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = s.env, os.Stdout, os.Stdout
	err := cmd.Run()
	if exitErr, ok := err.(*exec.ExitError); ok {
		fmt.Printf("(exit status %d)\n", exitErr.ExitCode())
		return nil
	}
	return err
}

// showImage prints the image the live Deployment runs.
func (s demoShell) showImage() error {
	return s.run("kubectl", "-n", "demo", "get", "deployment", "web", "-o", "jsonpath={.spec.template.spec.containers[0].image}{\"\\n\"}")
}

func run(ctx context.Context) error {
	dir := filepath.Join(os.TempDir(), "kubectl-gitops-demo")
	os.RemoveAll(dir)
	fmt.Println("Starting etcd, kube-apiserver, redis and Argo CD (repo-server, application-controller, API server) on 127.0.0.1…")
	start := time.Now()
	e, err := env.Start(ctx, env.Options{Dir: dir})
	if err != nil {
		return err
	}
	defer e.Stop()
	fmt.Printf("Ready in %s.\n", time.Since(start).Round(time.Second))

	admin, err := e.RESTConfig(env.Admin.Name)
	if err != nil {
		return err
	}
	apps := dynamic.NewForConfigOrDie(admin).Resource(argocd.ApplicationGVR).Namespace(e.ArgoNamespace)
	app := e.Application("web", env.FixtureApp, env.DemoNamespace,
		map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}, "syncOptions": []any{"ApplyOutOfSyncOnly=true"}})
	step(1, "An Argo CD Application \"web\" with automated sync, prune and self-heal, from a Git repository on disk")
	if _, err := apps.Create(ctx, app, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := waitUntil(ctx, func() bool {
		a, err := apps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false
		}
		s, _, _ := unstructured.NestedString(a.Object, "status", "sync", "status")
		return s == "Synced"
	}); err != nil {
		return err
	}
	token, err := e.ArgoToken(ctx)
	if err != nil {
		return err
	}
	jira := jiradouble.Start(demoDouble("jira"), jiradouble.Options{Project: "OPS", User: "oncall@example.com", Token: "demo-token"})
	defer jira.Close()
	jiraVars := []string{"JIRA_URL=" + jira.URL, "JIRA_PROJECT=OPS", "JIRA_USER=oncall@example.com", "JIRA_API_TOKEN=demo-token"}
	bin, _ := filepath.Abs("bin")
	sh := demoShell{env: append(append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+e.Kubeconfig(env.Oncall.Name), "ARGOCD_SERVER="+e.ArgoServerAddr, "ARGOCD_AUTH_TOKEN="+token, "ARGOCD_OPTS=--plaintext", "NO_COLOR=1"), jiraVars...)}
	if err := sh.showImage(); err != nil {
		return err
	}

	step(2, "The problem: a hand-made emergency patch is reverted by self-heal within seconds")
	if err := sh.run("kubectl", "-n", "demo", "set", "image", "deployment/web", "web=registry.example/web:1.0.1-hotfix"); err != nil {
		return err
	}
	time.Sleep(4 * time.Second)
	if err := sh.showImage(); err != nil {
		return err
	}
	fmt.Println("…back to the image in Git: the fix silently never happened.")

	github := gitdouble.Start(demoDouble("github"), gitdouble.Options{Kind: gitdouble.GitHub, Project: "acme/deploy", Token: "demo-github-token", HasBranch: e.Git.HasBranch})
	defer github.Close()
	argoVars := []string{"ARGOCD_SERVER=" + e.ArgoServerAddr, "ARGOCD_AUTH_TOKEN=" + token, "ARGOCD_OPTS=--plaintext"}
	stopController, err := startController(ctx, e, dir, append(argoVars, jiraVars...))
	if err != nil {
		return err
	}
	defer stopController()
	sh.env = append(sh.env, "GITHUB_TOKEN=demo-github-token", "GITHUB_API_URL="+github.API())

	step(3, "The break-glass: pause sync keeping the policy, patch, audit, file a Jira ticket, propose the fix to Git")
	if err := sh.run("kubectl", "gitops", "breakglass", "web", "deployment/web", "--image", "web=registry.example/web:1.0.1-hotfix",
		"--reason", "5xx spike after 1.0.0", "--incident", "INC-1", "--auto-restore", "--propose", "--project", "acme/deploy", "--provider", "github", "--yes"); err != nil {
		return err
	}
	time.Sleep(4 * time.Second)
	if err := sh.showImage(); err != nil {
		return err
	}
	fmt.Println("…the fix stays. The ticket links the pull request (shown as stored, in Jira wiki markup):")
	showTicket(jira)

	step(4, "Has Git caught up? Not yet: the pull request waits for review")
	if err := sh.run("kubectl", "gitops", "status"); err != nil {
		return err
	}
	if err := sh.run("kubectl", "gitops", "restore", "web"); err != nil {
		return err
	}
	live, err := apps.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return err
	}
	session, err := breakglass.SessionOf(live)
	if err != nil {
		return err
	}
	branch := breakglass.ProposalBranch(session.ID)
	if err := sh.run("git", "-C", e.Git.Dir, "diff", "main..."+branch); err != nil {
		return err
	}

	step(5, "A teammate reviews and merges the pull request: no one edits Git by hand")
	rev, err := e.Git.Merge(branch)
	if err != nil {
		return err
	}
	for _, c := range github.Changes() {
		if c.Head == branch {
			github.Merge(c.Number)
			fmt.Printf("merged PR #%d into main (%.12s)\n", c.Number, rev)
		}
	}

	step(6, "The controller sees Git caught up and restores by itself: the saved policy is back, the ticket closed")
	if err := waitUntil(ctx, func() bool {
		a, err := apps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false
		}
		_, open := a.GetAnnotations()[breakglass.SessionAnnotation]
		return !open
	}); err != nil {
		return fmt.Errorf("waiting for the controller to restore web (its log: %s): %w", filepath.Join(dir, "logs", "controller.log"), err)
	}
	if err := sh.run("kubectl", "gitops", "audit", "log", "--app", "web", "--event", "breakglass.restored"); err != nil {
		return err
	}
	showTicket(jira)
	if err := sh.run("kubectl", "-n", "argocd", "get", "application", "web", "-o", "jsonpath={.spec.syncPolicy}{\"\\n\"}"); err != nil {
		return err
	}
	if err := sh.showImage(); err != nil {
		return err
	}

	step(7, "What the auditor sees")
	if err := sh.run("kubectl", "gitops", "audit", "log"); err != nil {
		return err
	}
	if err := sh.run("kubectl", "gitops", "audit", "verify"); err != nil {
		return err
	}

	step(8, "A second person reviews the emergency change, and the auditor files the evidence")
	reviewer := demoShell{env: append(append([]string{}, sh.env...), "KUBECONFIG="+e.Kubeconfig(env.Reviewer.Name))}
	if err := reviewer.run("kubectl", "gitops", "audit", "log", "--unreviewed"); err != nil {
		return err
	}
	if err := reviewer.run("kubectl", "gitops", "audit", "review", session.ID, "--approve", "--note", "rollback was right; Git rolled forward"); err != nil {
		return err
	}
	if err := sh.run("kubectl", "gitops", "audit", "report"); err != nil {
		return err
	}

	envFile := filepath.Join(dir, "env.sh")
	exports := fmt.Sprintf("export KUBECONFIG=%s PATH=%s:$PATH\nexport ARGOCD_SERVER=%s ARGOCD_OPTS=--plaintext ARGOCD_AUTH_TOKEN=%s\nexport %s\nexport GITHUB_TOKEN=demo-github-token GITHUB_API_URL=%s\n",
		e.Kubeconfig(env.Oncall.Name), bin, e.ArgoServerAddr, token, strings.Join(jiraVars, " "), github.API())
	if err := os.WriteFile(envFile, []byte(exports), 0o600); err != nil {
		return err
	}
	fmt.Printf("\nThe environment keeps running. In another shell, as the on-call user:\n\n  source %s\n  kubectl gitops breakglass web deployment/web --replicas 4 --reason \"try it\" -y\n\n(kubeconfigs for admin, lead, auditor, reviewer, reviewer2 and nobody are beside it.) Logs: %s/logs. Press Ctrl-C to stop.\n",
		envFile, dir)
	<-ctx.Done()
	fmt.Println("\nstopping…")
	return nil
}

// startController runs `kubectl gitops controller` as it runs in the
// cluster: with its ServiceAccount's token and deploy/controller's rights,
// and extra environment (a read-only Argo CD account, which a session that
// holds fields needs for the field-level check, and Jira), logging under
// dir/logs. It looks at an auto-restore session's Git every 5s (a minute
// by default).
func startController(ctx context.Context, e *env.Env, dir string, extraEnv []string) (func(), error) {
	admin := exec.CommandContext(ctx, "kubectl", "apply", "-f", filepath.Join(env.RepoRoot(), "deploy", "controller", "rbac.yaml"))
	admin.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig(env.Admin.Name))
	if out, err := admin.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("applying deploy/controller/rbac.yaml: %v: %s", err, out)
	}
	kubeconfig, err := e.ServiceAccountKubeconfig(ctx, "kubectl-gitops-controller", dir)
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "logs", "controller.log"))
	if err != nil {
		return nil, err
	}
	bin, _ := filepath.Abs(filepath.Join("bin", "kubectl-gitops"))
	cmd := exec.Command(bin, "controller", "--app-namespace", e.ArgoNamespace, "--argocd-namespace", e.ArgoNamespace,
		"--lease-namespace", e.ArgoNamespace, "--audit-namespace", e.ArgoNamespace, "--address", "127.0.0.1:0", "--refresh-every", "5s")
	cmd.Env = append([]string{"HOME=" + dir, "KUBECONFIG=" + kubeconfig, "PATH=" + os.Getenv("PATH")}, extraEnv...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	fmt.Printf("The controller runs as ServiceAccount kubectl-gitops-controller (log: %s).\n", logFile.Name())
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		logFile.Close()
	}, nil
}

func waitUntil(ctx context.Context, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
	return nil
}
