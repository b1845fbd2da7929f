//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
	"github.com/kubectl-gitops/kubectl-gitops/test/gitdouble"
)

const githubToken = "ghp-double-token"

// commentedDeployment is the fixture's Deployment as people keep it:
// with comments, a quoted image, and a key order of its own.
func commentedDeployment(namespace string) string {
	d := env.AppFiles("app", namespace, env.FixtureImage)["app/deployment.yaml"]
	d = "# The web tier. Owned by team web; paged through OPS.\n" + d
	d = strings.Replace(d, "replicas: 2\n", "replicas: 2 # raised during incidents, then brought back\n", 1)
	return strings.Replace(d, "        image: "+env.FixtureImage, "        # pinned: bump through a pull request\n        image: \""+env.FixtureImage+"\"", 1)
}

// createCommentedApp creates Application app from a Deployment kept
// with comments (commentedDeployment), synced, and returns its file.
func createCommentedApp(t *testing.T, app string) string {
	t.Helper()
	file := "apps/" + app + "/deployment.yaml"
	var head string
	createApp(t, app, func(*unstructured.Unstructured, string) {
		var err error
		if head, err = environment(t).Git.Commit(app+": comments", map[string]string{file: commentedDeployment(app)}); err != nil {
			t.Fatal(err)
		}
	})
	waitSynced(t, app, head)
	return file
}

// startGitHub is a GitHub double for the environment's repository, as
// project acme/deploy: it opens a pull request only from a branch the
// repository has.
func startGitHub(t *testing.T) *gitdouble.Server {
	t.Helper()
	repo := environment(t).Git
	double := gitdouble.Start(t, gitdouble.Options{Kind: gitdouble.GitHub, Project: "acme/deploy", Token: githubToken, PageSize: 2, HasBranch: repo.HasBranch})
	t.Cleanup(double.Close)
	// Other people's pull requests: the tool pages past them.
	for _, head := range []string{"feature-a", "feature-b", "feature-c"} {
		double.Add(gitdouble.Change{Title: head, Head: head, Base: "main"})
	}
	return double
}

// TestProposeClosesTheLoop: break-glass --propose writes the live fix into
// Git as a pull request (the edited file differs from Git's in the patched
// value alone, its comments kept), records breakglass.proposed and links
// it from the ticket; status names the PR. Merging it is all a person
// does: Argo CD sees Git caught up and the controller restores the
// auto-restore session by itself.
func TestProposeClosesTheLoop(t *testing.T) {
	core(t)
	jira := startJira(t)
	startReplica(t, "replica-propose", jiraEnv(jira.URL, jiraToken)...)
	github := startGitHub(t)
	file := createCommentedApp(t, "pr-loop")

	oncall := newUser(t, env.Oncall.Name, append(jiraEnv(jira.URL, jiraToken), "GITHUB_TOKEN="+githubToken, "GITHUB_API_URL="+github.API())...)
	out, errOut := mustRun(t, oncall, 0, "breakglass", "pr-loop", "deployment/web", "--image", "web=registry.example/web:hotfix",
		"--reason", "5xx after 1.0.0", "--auto-restore", "--propose", "--provider", "github", "--api-url", github.API(), "--project", "acme/deploy", "-y")
	if !strings.Contains(out, "opened PR #4: "+github.URL+"/acme/deploy/pull/4") || strings.Contains(out+errOut, githubToken) {
		t.Fatalf("breakglass --propose:\n%s\n%s", out, errOut)
	}
	session := sessionOf(t, "pr-loop").ID
	branch := breakglass.ProposalBranch(session)

	assertProposedHotfix(t, github, "pr-loop", file, session)
	// The record, by the on-call, and the ticket links the PR.
	recorded := proposedRecords(t, session, env.Oncall.Name, branch)
	if recorded.Proposal.Number != 4 {
		t.Fatalf("breakglass.proposed record: %+v", recorded.Proposal)
	}
	issues := sessionIssues(jira, session)
	if len(issues) != 1 || !contains(issues[0].RemoteLinks, recorded.Proposal.URL) || !strings.Contains(strings.Join(issues[0].Comments, "\n"), "|"+recorded.Proposal.URL+"]") {
		t.Errorf("the ticket does not link the pull request: %+v", issues)
	}
	out, _ = mustRun(t, oncall, 0, "status", "pr-loop")
	if !strings.Contains(out, "PR #4 open") || !strings.Contains(out, "waiting") {
		t.Errorf("status before the merge:\n%s", out)
	}
	// Proposing again finds the branch there: nothing is pushed twice.
	if _, errOut := mustRun(t, oncall, 1, "propose", "pr-loop", "--provider", "github", "--api-url", github.API(), "--project", "acme/deploy"); !strings.Contains(errOut, "branch "+branch+" already exists") {
		t.Errorf("a second propose: %s", errOut)
	}

	mergeAndRestore(t, github, 4, "pr-loop", session)
	if got := imageIn(context.Background(), t, "pr-loop"); got != "registry.example/web:hotfix" {
		t.Errorf("live image after the restore: %s", got)
	}
	assertChainIntact(t, oncall)
}

// TestControllerProposesWhatTheBreakglassCouldNot: the on-call has no
// GitHub token at 3 a.m., so break-glass --propose puts the fix live and
// warns that it could not propose it; the session is marked, and the
// controller, which has no git binary on its PATH (as in its image),
// proposes it with its own token: the branch holds the live value alone,
// the pull request is opened, breakglass.proposed is the controller's.
// Merging it restores the session with no one else's hand.
func TestControllerProposesWhatTheBreakglassCouldNot(t *testing.T) {
	core(t)
	e := environment(t)
	github := startGitHub(t)
	file := createCommentedApp(t, "pr-ctrl")

	oncall := newUser(t, env.Oncall.Name)
	_, errOut := mustRun(t, oncall, 0, "breakglass", "pr-ctrl", "deployment/web", "--image", "web=registry.example/web:hotfix",
		"--reason", "5xx after 1.0.0", "--auto-restore", "--propose", "--provider", "github", "--api-url", github.API(), "--project", "acme/deploy", "-y")
	if !strings.Contains(errOut, "it was not proposed in Git") || !strings.Contains(errOut, "GITHUB_TOKEN") {
		t.Fatalf("breakglass --propose with no token:\n%s", errOut)
	}
	session := sessionOf(t, "pr-ctrl").ID
	branch := breakglass.ProposalBranch(session)
	if len(github.Changes()) != 3 {
		t.Fatalf("a pull request was opened with no token: %+v", github.Changes())
	}

	noGit := t.TempDir() // the image has no git: nor has this PATH
	startReplicaWith(t, "replica-proposer", []string{"--audit-namespace", e.ArgoNamespace, "--propose-after", "1s",
		"--propose-provider", "github", "--propose-project", e.Git.URL() + "=acme/deploy"},
		[]string{"GITHUB_TOKEN=" + githubToken, "GITHUB_API_URL=" + github.API(), "PATH=" + noGit})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitFor(ctx, t, "the controller's breakglass.proposed record", func() (bool, string) {
		for _, r := range sessionRecords(t, session) {
			if r.Event == audit.EventProposed && r.Outcome.Status != audit.StatusStarted {
				return true, ""
			}
		}
		return false, "no breakglass.proposed outcome"
	})
	if recorded := proposedRecords(t, session, controllerSA, branch); recorded.Proposal.Number != 4 {
		t.Fatalf("breakglass.proposed: %+v", recorded.Proposal)
	}
	assertProposedHotfix(t, github, "pr-ctrl", file, session)
	// The on-call has no token to ask GitHub the request's state: status
	// names it from the record.
	out, _ := mustRun(t, oncall, 0, "status", "pr-ctrl")
	if !strings.Contains(out, "PR #4") {
		t.Errorf("status:\n%s", out)
	}
	mergeAndRestore(t, github, 4, "pr-ctrl", session)
	assertChainIntact(t, oncall)
}

// assertProposedHotfix checks the fourth pull request (after the three
// startGitHub adds) is session's, from its branch into main, saying why,
// and that the branch changes app's file to the hotfix image and nothing
// else: comments, quotes and order are Git's.
func assertProposedHotfix(t *testing.T, github *gitdouble.Server, app, file, session string) {
	t.Helper()
	branch := breakglass.ProposalBranch(session)
	prs := github.Changes()
	if len(prs) != 4 || prs[3].Head != branch || prs[3].Base != "main" || !strings.Contains(prs[3].Body, session) || !strings.Contains(prs[3].Body, "5xx after 1.0.0") {
		t.Fatalf("pull requests %+v", prs)
	}
	proposed, err := environment(t).Git.Show(branch, file)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(commentedDeployment(app), env.FixtureImage, "registry.example/web:hotfix", 1); proposed+"\n" != want {
		t.Errorf("the proposed file:\n%s\nwant:\n%s", proposed, want)
	}
}

// mergeAndRestore is all a person does once a proposal is open: merge
// pull request number (the session's branch) of app. Argo CD then sees Git
// caught up and the controller restores the auto-restore session by
// itself; sync is back on and Synced, keeping the fix, which is Git's now.
func mergeAndRestore(t *testing.T, github *gitdouble.Server, number int, app, session string) {
	t.Helper()
	if _, err := environment(t).Git.Merge(breakglass.ProposalBranch(session)); err != nil {
		t.Fatal(err)
	}
	github.Merge(number)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitFor(ctx, t, "the controller to restore "+app, func() (bool, string) {
		a, err := appsClient(t).Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		_, open := a.GetAnnotations()[breakglass.SessionAnnotation]
		return !open, "session still open"
	})
	// The session goes from the Application before the restore's
	// succeeded record is written: wait for that too.
	waitFor(ctx, t, "the controller's breakglass.restored record of "+app, func() (bool, string) {
		for _, r := range sessionRecords(t, session) {
			if r.Event == audit.EventRestored && r.Outcome.Status == audit.StatusSucceeded && r.Actor.Username == controllerSA {
				return true, ""
			}
		}
		return false, "no breakglass.restored record by the controller"
	})
	a := waitSynced(t, app, "")
	if !autoSyncOn(mapOf(a, "spec", "syncPolicy")) {
		t.Errorf("sync policy after the restore: %v", mapOf(a, "spec", "syncPolicy"))
	}
}

func mapOf(u *unstructured.Unstructured, fields ...string) map[string]any {
	m, _, _ := unstructured.NestedMap(u.Object, fields...)
	return m
}

// proposedRecords checks session's breakglass.proposed records: exactly
// a started one by actor naming branch, written ahead of the push, then
// its success naming the same branch; it returns the success.
func proposedRecords(t *testing.T, session, actor, branch string) *audit.Record {
	t.Helper()
	var proposed []*audit.Record
	for _, r := range sessionRecords(t, session) {
		if r.Event == audit.EventProposed {
			proposed = append(proposed, r)
		}
	}
	ok := len(proposed) == 2
	for i, status := range []string{audit.StatusStarted, audit.StatusSucceeded} {
		ok = ok && proposed[i].Outcome.Status == status && proposed[i].Actor.Username == actor && proposed[i].Proposal != nil && proposed[i].Proposal.Branch == branch
	}
	if !ok || proposed[0].Proposal.Commit != "" || proposed[1].Proposal.Commit == "" {
		for _, r := range proposed {
			t.Logf("breakglass.proposed %d: %s by %s: %+v", r.Seq, r.Outcome.Status, r.Actor.Username, r.Proposal)
		}
		t.Fatalf("session %s's proposal is not one started record by %s naming %s, then its success", session, actor, branch)
	}
	return proposed[1]
}

// TestProposeRefusesWhatItCannotProve: a dry run shows the change and
// pushes nothing; an Application pinned to a commit is refused (a merged
// branch would not move it); a fix changed live since the session is
// refused; a provider without a token is a usage error. None of them pushes a branch, opens a request
// or writes a record.
func TestProposeRefusesWhatItCannotProve(t *testing.T) {
	e := environment(t)
	github := startGitHub(t)
	deployApp(t, "pr-dry")
	pinned := createApp(t, "pr-pinned", func(app *unstructured.Unstructured, head string) {
		if err := unstructured.SetNestedField(app.Object, head, "spec", "source", "targetRevision"); err != nil {
			t.Fatal(err)
		}
	})
	waitSynced(t, "pr-pinned", pinned)
	oncall := newUser(t, env.Oncall.Name, "GITHUB_TOKEN="+githubToken)
	for _, app := range []string{"pr-dry", "pr-pinned"} {
		mustRun(t, oncall, 0, "breakglass", app, "deployment/web", "--replicas", "4", "--reason", "load", "-y")
	}
	where := []string{"--provider", "github", "--api-url", github.API(), "--project", "acme/deploy"}

	out, _ := mustRun(t, oncall, 0, append([]string{"propose", "pr-dry", "--dry-run"}, where...)...)
	if !strings.Contains(out, "-  replicas: 2") || !strings.Contains(out, "+  replicas: 4") || !strings.Contains(out, "dry run: nothing was pushed") {
		t.Errorf("propose --dry-run:\n%s", out)
	}
	_, errOut := mustRun(t, oncall, 1, append([]string{"propose", "pr-pinned"}, where...)...)
	if !strings.Contains(errOut, "targetRevision "+pinned+" is not a branch") {
		t.Errorf("propose of an Application pinned to a commit: %s", errOut)
	}
	noToken := newUser(t, env.Oncall.Name)
	if _, errOut := mustRun(t, noToken, 2, append([]string{"propose", "pr-dry"}, where...)...); !strings.Contains(errOut, "set GITHUB_TOKEN") {
		t.Errorf("propose without a token: %s", errOut)
	}
	// The push is refused: the record written ahead of it names the
	// branch, the next one says it failed, and no proposal counts.
	unprotect, err := e.Git.RefuseBranches("kubectl-gitops/")
	if err != nil {
		t.Fatal(err)
	}
	if _, errOut := mustRun(t, oncall, 1, append([]string{"propose", "pr-dry"}, where...)...); !strings.Contains(errOut, "are protected") {
		t.Errorf("propose whose push is refused: %s", errOut)
	}
	unprotect()
	dry := sessionOf(t, "pr-dry").ID
	var tried []*audit.Record
	for _, r := range sessionRecords(t, dry) {
		if r.Event == audit.EventProposed {
			tried = append(tried, r)
		}
	}
	if len(tried) != 2 || tried[0].Outcome.Status != audit.StatusStarted || tried[0].Proposal == nil || tried[0].Proposal.Branch != breakglass.ProposalBranch(dry) ||
		tried[1].Outcome.Status != audit.StatusFailed || tried[1].Proposal != nil || !strings.Contains(tried[1].Outcome.Error, "are protected") {
		t.Errorf("the refused push's records: %+v", tried)
	}
	if st := statusJSON(t, oncall, "pr-dry"); st.Proposal != nil {
		t.Errorf("a refused push counts as a proposal: %+v", st.Proposal)
	}
	// The live value is no longer the session's: proposing it would write
	// someone else's change into Git in the session's name.
	newUser(t, env.Admin.Name).kubectl("-n", "pr-dry", "scale", "deployment/web", "--replicas", "6")
	if _, errOut := mustRun(t, oncall, 1, append([]string{"propose", "pr-dry"}, where...)...); !strings.Contains(errOut, "no longer holds") {
		t.Errorf("propose of a fix changed live since: %s", errOut)
	}

	for _, app := range []string{"pr-dry", "pr-pinned"} {
		session := sessionOf(t, app).ID
		if e.Git.HasBranch(breakglass.ProposalBranch(session)) {
			t.Errorf("%s: a branch was pushed", app)
		}
		for _, r := range sessionRecords(t, session) {
			if r.Event == audit.EventProposed && (app != "pr-dry" || r.Outcome.Status == audit.StatusSucceeded) {
				t.Errorf("%s: a proposal was recorded: %+v", app, r.Proposal)
			}
		}
	}
	for _, r := range github.Requests() {
		if r.Method != "GET" {
			t.Errorf("a request changed the provider: %s %s", r.Method, r.Path)
		}
	}
}

// TestProposeOpensAGitLabMergeRequest: propose after the break-glass, to a
// GitLab project: the merge request already open for another branch is
// paged past (X-Next-Page), one is opened from the session's branch, and
// status names it.
func TestProposeOpensAGitLabMergeRequest(t *testing.T) {
	e := environment(t)
	gitlab := gitdouble.Start(t, gitdouble.Options{Kind: gitdouble.GitLab, Project: "acme/deploy", Token: "glpat-double", PageSize: 1, HasBranch: e.Git.HasBranch})
	t.Cleanup(gitlab.Close)
	gitlab.Add(gitdouble.Change{Title: "other", Head: "feature-a", Base: "main"})
	deployApp(t, "pr-gitlab")
	oncall := newUser(t, env.Oncall.Name, "GITLAB_TOKEN=glpat-double")
	mustRun(t, oncall, 0, "breakglass", "pr-gitlab", "deployment/web", "--replicas", "5", "--reason", "load", "-y")
	out, errOut := mustRun(t, oncall, 0, "propose", "pr-gitlab", "--provider", "gitlab", "--api-url", gitlab.API(), "--project", "acme/deploy", "-o", "json")
	session := sessionOf(t, "pr-gitlab").ID
	if !strings.Contains(out, `"number": 2`) || !strings.Contains(out, `"provider": "gitlab"`) || strings.Contains(out+errOut, "glpat-double") {
		t.Errorf("propose -o json:\n%s\n%s", out, errOut)
	}
	if mrs := gitlab.Changes(); len(mrs) != 2 || mrs[1].Head != breakglass.ProposalBranch(session) || mrs[1].Base != "main" || !mrs[1].RemoveSource {
		t.Errorf("merge requests %+v", mrs)
	}
	proposed, err := e.Git.Show(breakglass.ProposalBranch(session), "apps/pr-gitlab/deployment.yaml")
	if err != nil || !strings.Contains(proposed, "replicas: 5") {
		t.Errorf("the proposed file: %v\n%s", err, proposed)
	}
	if out, _ := mustRun(t, oncall, 0, "status", "pr-gitlab"); !strings.Contains(out, "MR !2") {
		t.Errorf("status:\n%s", out)
	}
}

// TestProposeToTheHydratorsDrySource: with the source hydrator the fix is
// proposed in the dry source (the hydrated branch is generated); once the
// branch is merged, Argo CD hydrates it, status sees Git caught up field by
// field, and restore keeps the fix.
func TestProposeToTheHydratorsDrySource(t *testing.T) {
	e := environment(t)
	if e.Argo.Major() < 3 {
		t.Skipf("Argo CD %s has no source hydrator", e.Argo.Version)
	}
	ctx := context.Background()
	const name = "hy-prop"
	dry := createHydrated(t, name)
	hydrated := waitHydrated(t, name, dry)
	token, err := e.ArgoToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oncall := newUser(t, env.Oncall.Name, "ARGOCD_SERVER="+e.ArgoServerAddr, "ARGOCD_AUTH_TOKEN="+token, "ARGOCD_OPTS=--plaintext")
	out, errOut := mustRun(t, oncall, 0, "breakglass", name, "deployment/web", "--replicas", "5", "--reason", "hydrated hotfix", "--propose", "--provider", "none", "-y")
	session := sessionOf(t, name).ID
	branch := breakglass.ProposalBranch(session)
	if !strings.Contains(out, "pushed "+branch) {
		t.Fatalf("breakglass --propose:\n%s\n%s", out, errOut)
	}
	file := "apps/" + name + "/deployment.yaml"
	proposed, err := e.Git.Show(branch, file)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(env.AppFiles("apps/"+name, name, env.FixtureImage)[file], "replicas: 2", "replicas: 5", 1)
	if proposed+"\n" != want {
		t.Errorf("the dry source's file on %s:\n%s\nwant:\n%s", branch, proposed, want)
	}
	fix, err := e.Git.Merge(branch)
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, oncall, 0, "status", name, "--wait", "--timeout", "2m")
	if st := statusJSON(t, oncall, name); st.Git != breakglass.GitCaughtUp || st.Revision != fix || st.Hydrated == hydrated || !st.FieldLevel {
		t.Fatalf("after the proposal was merged: %+v", st)
	}
	mustRun(t, oncall, 0, "restore", name, "-y")
	if got := replicasIn(ctx, t, name); got != 5 {
		t.Errorf("restoring reverted the fix: %d replicas", got)
	}
}

// TestProposeToTheSourceThatRendersTheFix: of an Application with several
// sources, the fix is proposed in the one that renders the patched object
// (the second here; the first renders a ConfigMap), and nothing in the
// other changes. Merged, status sees Git caught up and restore keeps it.
func TestProposeToTheSourceThatRendersTheFix(t *testing.T) {
	core(t)
	e := environment(t)
	ctx := context.Background()
	const name = "ms-prop"
	files := env.AppFiles("apps/"+name, name, env.FixtureImage)
	files["apps/"+name+"-settings/configmap.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-settings\ndata:\n  mode: normal\n"
	createAppFrom(t, name, files, "apps/"+name, func(app *unstructured.Unstructured, _ string) {
		spec := app.Object["spec"].(map[string]any)
		delete(spec, "source")
		spec["sources"] = []any{
			map[string]any{"repoURL": e.Git.URL(), "path": "apps/" + name + "-settings", "targetRevision": "HEAD"},
			map[string]any{"repoURL": e.Git.URL(), "path": "apps/" + name, "targetRevision": "HEAD"},
		}
	})
	waitSynced(t, name, "")
	token, err := e.ArgoToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oncall := newUser(t, env.Oncall.Name, "ARGOCD_SERVER="+e.ArgoServerAddr, "ARGOCD_AUTH_TOKEN="+token, "ARGOCD_OPTS=--plaintext")
	out, errOut := mustRun(t, oncall, 0, "breakglass", name, "deployment/web", "--replicas", "5", "--reason", "multi-source hotfix", "--propose", "--provider", "none", "-y")
	branch := breakglass.ProposalBranch(sessionOf(t, name).ID)
	if !strings.Contains(out, "pushed "+branch) {
		t.Fatalf("breakglass --propose:\n%s\n%s", out, errOut)
	}
	file := "apps/" + name + "/deployment.yaml"
	if proposed, err := e.Git.Show(branch, file); err != nil || proposed+"\n" != strings.Replace(files[file], "replicas: 2", "replicas: 5", 1) {
		t.Errorf("the second source's file on %s (%v):\n%s", branch, err, proposed)
	}
	if settings, err := e.Git.Show(branch, "apps/"+name+"-settings/configmap.yaml"); err != nil || settings+"\n" != files["apps/"+name+"-settings/configmap.yaml"] {
		t.Errorf("the first source changed on %s (%v):\n%s", branch, err, settings)
	}
	fix, err := e.Git.Merge(branch)
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, oncall, 0, "status", name, "--wait", "--timeout", "2m")
	if st := statusJSON(t, oncall, name); st.Git != breakglass.GitCaughtUp || !st.FieldLevel || len(st.Revisions) != 2 || st.Revisions[1] != fix {
		t.Fatalf("after the proposal was merged: %+v", st)
	}
	mustRun(t, oncall, 0, "restore", name, "-y")
	if got := replicasIn(ctx, t, name); got != 5 {
		t.Errorf("restoring reverted the fix: %d replicas", got)
	}
}

// TestDriftProposeMovesManualDriftIntoGit: on an Application that does
// not self-heal, a person's kubectl scale and set image drift two fields;
// drift --propose writes their live values into the manifest (a dry run
// first, which pushes nothing), and once the branch is merged Argo CD
// syncs Git, which now says what the cluster does: no drift is left.
func TestDriftProposeMovesManualDriftIntoGit(t *testing.T) {
	e := environment(t)
	ctx := context.Background()
	const name = "dr-prop"
	createApp(t, name, func(app *unstructured.Unstructured, _ string) {
		app.Object["spec"].(map[string]any)["syncPolicy"] = map[string]any{"automated": map[string]any{"prune": true}} // no self-heal
	})
	waitSynced(t, name, "")
	person := newUser(t, env.Admin.Name)
	person.kubectl("-n", name, "scale", "deployment", "web", "--replicas", "4")
	person.kubectl("-n", name, "set", "image", "deployment/web", "web=registry.example/web:manual")
	oncall := argoUser(t)
	ctxWait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	waitFor(ctxWait, t, "Argo CD to see both writes", func() (bool, string) {
		reports := driftJSON(t, oncall, name)
		return len(reports) == 1 && len(reports[0].Fields) == 2, jsonText(reports)
	})

	out, _ := mustRun(t, oncall, 0, "drift", name, "--propose", "--provider", "none", "--dry-run")
	if !strings.Contains(out, "would push branch kubectl-gitops/drift-"+name+"-") || !strings.Contains(out, "+  replicas: 4") {
		t.Errorf("drift --propose --dry-run:\n%s", out)
	}
	out, errOut := mustRun(t, oncall, 0, "drift", name, "--propose", "--provider", "none", "--yes")
	i := strings.Index(out, "pushed kubectl-gitops/drift-"+name+"-")
	if i < 0 {
		t.Fatalf("drift --propose:\n%s\n%s", out, errOut)
	}
	branch := strings.Fields(out[i:])[1]
	file := "apps/" + name + "/deployment.yaml"
	want := strings.Replace(strings.Replace(env.AppFiles("apps/"+name, name, env.FixtureImage)[file], "replicas: 2", "replicas: 4", 1), env.FixtureImage, "registry.example/web:manual", 1)
	if proposed, err := e.Git.Show(branch, file); err != nil || proposed+"\n" != want {
		t.Errorf("the proposed file on %s (%v):\n%s\nwant:\n%s", branch, err, proposed, want)
	}
	fix, err := e.Git.Merge(branch)
	if err != nil {
		t.Fatal(err)
	}
	// A webhook would tell Argo CD of the merge; here a refresh does.
	person.kubectl("-n", e.ArgoNamespace, "annotate", "application", name, argocd.RefreshAnnotation+"=normal", "--overwrite")
	waitSynced(t, name, fix)
	waitFor(ctxWait, t, "no drift once Git has the live values", func() (bool, string) {
		reports := driftJSON(t, oncall, name)
		return len(reports) == 1 && len(reports[0].Fields) == 0, jsonText(reports)
	})
	if got := replicasIn(ctx, t, name); got != 4 {
		t.Errorf("after the merge: %d replicas, want 4", got)
	}
}
