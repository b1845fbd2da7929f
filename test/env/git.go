package env

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// GitRepo is a Git repository on disk that the repo-server reads as file://.
type GitRepo struct {
	Dir string
	mu  sync.Mutex
}

// URL is the repository's address as an Application's repoURL.
func (g *GitRepo) URL() string { return "file://" + g.Dir }

// FixtureApp is the path, inside the fixture repository, of the plain-YAML
// application every environment starts with.
const FixtureApp = "apps/web"

// FixtureImage is the image the fixture's Deployment starts with.
const FixtureImage = "registry.example/web:1.0.0"

// FixtureFiles are the fixture application's files: a Deployment and a
// ConfigMap in namespace demo.
func FixtureFiles(image string) map[string]string {
	return AppFiles(FixtureApp, DemoNamespace, image)
}

// AppFiles are the files of an application like the fixture's at path in
// the repository, with its resources in namespace.
func AppFiles(path, namespace, image string) map[string]string {
	return map[string]string{
		path + "/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: ` + namespace + `
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: ` + image + `
        ports:
        - containerPort: 8080
`,
		path + "/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
  namespace: ` + namespace + `
data:
  greeting: hello
`,
	}
}

// newGitRepo creates a repository at dir holding the fixture application.
func newGitRepo(dir string) (*GitRepo, error) {
	g := &GitRepo{Dir: dir}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := g.git("init", "--quiet", "--initial-branch=main"); err != nil {
		return nil, err
	}
	if _, err := g.Commit("fixture: web application", FixtureFiles(FixtureImage)); err != nil {
		return nil, err
	}
	return g, nil
}

// Commit writes files (path → content, relative to the repository) and commits
// them, returning the new revision.
func (g *GitRepo) Commit(message string, files map[string]string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for path, content := range files {
		full := filepath.Join(g.Dir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	if _, err := g.git("add", "--all"); err != nil {
		return "", err
	}
	if _, err := g.git("commit", "--quiet", "--allow-empty", "-m", message); err != nil {
		return "", err
	}
	return g.Head()
}

// HasBranch is whether the repository has branch: what a Git provider
// double asks before opening a request from it.
func (g *GitRepo) HasBranch(branch string) bool {
	_, err := g.git("rev-parse", "--verify", "--quiet", "refs/heads/"+branch)
	return err == nil
}

// RefuseBranches has the repository refuse pushes to branches under
// prefix, as a protected-branch rule of a provider does, until the
// returned func is called.
func (g *GitRepo) RefuseBranches(prefix string) (func(), error) {
	hook := filepath.Join(g.Dir, ".git", "hooks", "pre-receive")
	script := "#!/bin/sh\nwhile read old new ref; do\n  case \"$ref\" in refs/heads/" + prefix + "*) echo \"branches " + prefix + "* are protected\" >&2; exit 1;; esac\ndone\n"
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		return nil, err
	}
	return func() { os.Remove(hook) }, nil
}

// Show is the content of path at rev (a branch or a commit).
func (g *GitRepo) Show(rev, path string) (string, error) {
	return g.git("show", rev+":"+path)
}

// Merge merges branch into main, as a person merging the pull request
// does, and returns the new revision of main.
func (g *GitRepo) Merge(branch string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, err := g.git("merge", "--quiet", "--no-ff", "-m", "Merge branch '"+branch+"'", branch); err != nil {
		return "", err
	}
	return g.Head()
}

// Head returns the revision main points at.
func (g *GitRepo) Head() (string, error) {
	return g.git("rev-parse", "HEAD")
}

func (g *GitRepo) git(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = g.Dir
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=fixture", "GIT_AUTHOR_EMAIL=fixture@example.invalid",
		"GIT_COMMITTER_NAME=fixture", "GIT_COMMITTER_EMAIL=fixture@example.invalid",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// Application returns an Argo CD Application named name in the
// environment's Argo CD namespace, reading path of the fixture repository
// and deploying to namespace of the Argo CD cluster, with syncPolicy (nil
// for manual sync).
func (e *Env) Application(name, path, namespace string, syncPolicy map[string]any) *unstructured.Unstructured {
	spec := map[string]any{
		"project":     "default",
		"source":      map[string]any{"repoURL": e.Git.URL(), "path": path, "targetRevision": "HEAD"},
		"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": namespace},
	}
	if syncPolicy != nil {
		spec["syncPolicy"] = syncPolicy
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": name, "namespace": e.ArgoNamespace},
		"spec":     spec,
	}}
}
