package proposal

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitRun runs the git binary in dir: the test's own hands on a repository.
func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(gitBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// upstream is a bare repository with one commit on main, holding
// app/deployment.yaml.
func upstream(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	work, bare := filepath.Join(root, "work"), filepath.Join(root, "deploy.git")
	if err := os.MkdirAll(filepath.Join(work, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "app", "deployment.yaml"), []byte("replicas: 2 # kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, work, "init", "--quiet", "--initial-branch", "main")
	gitRun(t, work, "add", ".")
	gitRun(t, work, "commit", "--quiet", "-m", "first")
	gitRun(t, root, "clone", "--quiet", "--bare", work, bare)
	return bare
}

// proposeInProcess clones url's main with auth, commits a change on a new
// branch and pushes it, as the controller does.
func proposeInProcess(t *testing.T, url string, auth *Auth, there bool) (*Repo, error) {
	t.Helper()
	ctx := context.Background()
	repo, err := CloneWith(ctx, Source{RepoURL: url, TargetRevision: "main"}, filepath.Join(t.TempDir(), "repo"), "system:serviceaccount:argocd:kubectl-gitops-controller", auth)
	if err != nil {
		return nil, err
	}
	if exists, err := repo.BranchExists(ctx, "kubectl-gitops/s1"); err != nil || exists != there {
		t.Fatalf("branch exists before the push: %t %v", exists, err)
	}
	if _, err := repo.Commit(ctx, "kubectl-gitops/s1", "web: bring Git up to session s1", []File{{Path: "app/deployment.yaml", Data: []byte(fmt.Sprintf("replicas: %d # kept\n", map[bool]int{false: 5, true: 6}[there]))}}); err != nil {
		t.Fatal(err)
	}
	return repo, repo.Push(ctx, "kubectl-gitops/s1")
}

// The controller's image has no git: it clones, commits and pushes in
// process. Against a repository on this machine (file://), served in
// process too, with PATH emptied so that no git binary can be what works.
func TestInProcessGitProposesWithNoGitBinary(t *testing.T) {
	bare := upstream(t)
	t.Setenv("PATH", t.TempDir())
	repo, err := proposeInProcess(t, "file://"+bare, &Auth{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if repo.Base != "main" {
		t.Errorf("base %q", repo.Base)
	}
	head, err := repo.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if exists, err := repo.BranchExists(context.Background(), "kubectl-gitops/s1"); err != nil || !exists {
		t.Fatalf("branch after the push: %t %v", exists, err)
	}
	if got := gitRun(t, bare, "rev-parse", "refs/heads/kubectl-gitops/s1"); got != head {
		t.Errorf("pushed %s, committed %s", got, head)
	}
	if got := gitRun(t, bare, "show", "kubectl-gitops/s1:app/deployment.yaml"); got != "replicas: 5 # kept" {
		t.Errorf("the branch holds %q", got)
	}
	if got := gitRun(t, bare, "log", "-1", "--format=%an <%ae>%n%s", "kubectl-gitops/s1"); got != "system:serviceaccount:argocd:kubectl-gitops-controller <system:serviceaccount:argocd:kubectl-gitops-controller@kubectl-gitops.invalid>\nweb: bring Git up to session s1" {
		t.Errorf("the commit: %s", got)
	}
	if got := gitRun(t, bare, "rev-parse", "main"); got == head {
		t.Error("main moved")
	}
	// The controller asks the remote alone whether a recorded branch is
	// there, with no clone.
	for branch, want := range map[string]bool{"kubectl-gitops/s1": true, "kubectl-gitops/never-pushed": false} {
		if got, err := RemoteBranchExists(context.Background(), "file://"+bare, branch, &Auth{}); err != nil || got != want {
			t.Errorf("RemoteBranchExists(%s) = %t, %v; want %t", branch, got, err, want)
		}
	}
	if _, err := RemoteBranchExists(context.Background(), "ssh://git@example.invalid/deploy.git", "main", &Auth{Token: "t", Hosts: []string{"example.invalid"}}); !errors.Is(err, ErrCannotPropose) {
		t.Errorf("RemoteBranchExists over ssh: %v, want ErrCannotPropose", err)
	}
	// A second push of the branch is refused: a proposal never overwrites.
	if _, err := proposeInProcess(t, "file://"+bare, &Auth{}, true); err == nil {
		t.Error("the branch was pushed over")
	}
}

// gitBin is the git binary, found before a test empties PATH.
var gitBin, _ = exec.LookPath("git")

// Over HTTPS the controller sends its token as basic authentication, and
// only there; a server that refuses it fails the push, naming no secret.
func TestInProcessGitPushesWithTheToken(t *testing.T) {
	bare := upstream(t)
	gitRun(t, bare, "config", "http.receivepack", "true")
	var users []string
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		users = append(users, user)
		if !ok || pass != "s3cr3t-token" {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		(&cgi.Handler{Path: gitBin, Args: []string{"http-backend"}, Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(bare), "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=" + user}}).ServeHTTP(w, r)
	}))
	defer server.Close()
	url := server.URL + "/deploy.git"
	host := strings.TrimPrefix(server.URL, "https://")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})
	auth := func(token string, hosts ...string) *Auth { return &Auth{Token: token, Hosts: hosts, CABundle: ca} }

	if _, err := proposeInProcess(t, url, auth("s3cr3t-token", host), false); err != nil {
		t.Fatal(err)
	}
	if got := gitRun(t, bare, "show", "kubectl-gitops/s1:app/deployment.yaml"); got != "replicas: 5 # kept" {
		t.Errorf("the branch holds %q", got)
	}
	for _, u := range users {
		if u != "x-access-token" {
			t.Errorf("basic auth user %q, want x-access-token", u)
		}
	}

	_, err := CloneWith(context.Background(), Source{RepoURL: url, TargetRevision: "main"}, filepath.Join(t.TempDir(), "repo"), "c", auth("wrong", host))
	if err == nil || strings.Contains(err.Error(), "wrong") {
		t.Errorf("a refused token: %v", err)
	}
	// A repository on a host not named is refused before any request:
	// whoever points an Application at their server gets no token.
	before := len(users)
	for _, refused := range []struct {
		url  string
		auth *Auth
	}{
		{url, auth("s3cr3t-token", "github.com")},
		{url, auth("s3cr3t-token", "127.0.0.1")}, // the host, but another port than 443
		{strings.Replace(url, "https://", "http://", 1), auth("s3cr3t-token", host)},
	} {
		_, err = CloneWith(context.Background(), Source{RepoURL: refused.url, TargetRevision: "main"}, filepath.Join(t.TempDir(), "repo"), "c", refused.auth)
		if !errors.Is(err, ErrCannotPropose) || len(users) != before || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s with hosts %v: %v, %d requests", refused.url, refused.auth.Hosts, err, len(users)-before)
		}
	}
	// SSH is the user's, through the git binary: the controller refuses it.
	_, err = CloneWith(context.Background(), Source{RepoURL: "git@github.com:acme/deploy.git", TargetRevision: "main"}, t.TempDir(), "c", &Auth{Token: "t"})
	if !errors.Is(err, ErrCannotPropose) {
		t.Errorf("an SSH URL: %v", err)
	}
}

// The controller renders only what the checkout holds: a kustomization
// (or one it includes) naming a URL, a remote base or a path outside the
// repository is refused before kustomize fetches anything.
func TestLocalKustomizationRefusesWhatIsElsewhere(t *testing.T) {
	root := t.TempDir()
	write := func(path, data string) {
		full := filepath.Join(root, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("base/kustomization.yaml", "resources:\n- deployment.yaml\n")
	write("base/deployment.yaml", "kind: Deployment\n")
	write("prod/kustomization.yaml", "resources:\n- ../base\n")
	if err := LocalKustomization(root, "prod"); err != nil {
		t.Fatalf("a local overlay: %v", err)
	}
	for name, entry := range map[string]string{
		"url":     "https://attacker.example/slow.yaml",
		"remote":  "github.com/acme/deploy//base?ref=main",
		"outside": "../../etc",
	} {
		write("base/kustomization.yaml", "resources:\n- deployment.yaml\n- "+entry+"\n")
		if err := LocalKustomization(root, "prod"); !errors.Is(err, ErrCannotPropose) || !strings.Contains(err.Error(), "base") {
			t.Errorf("%s in an included base: %v", name, err)
		}
	}
}
