package proposal

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/kubectl-gitops/kubectl-gitops/next"
	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// Auth is how the in-cluster controller reaches a repository: its image
// has no git binary and nobody's credential helpers, so it speaks Git in
// process, over HTTPS with a token from its Secret. A Repo cloned with a
// nil Auth runs the git binary with the user's own credentials instead.
type Auth struct {
	// Username goes with Token in HTTP basic authentication; "" sends
	// x-access-token, which GitHub expects with an app or personal token
	// (GitLab takes any name with a token).
	Username string
	// Token is the password; "" sends no credentials (a repository that
	// lets anyone push, or one on this machine).
	Token string
	// Hosts are the only hosts Token is sent to, over HTTPS on port 443
	// (HOST:PORT for another port): an Application's source names its
	// repository, and whoever may point one at a server of theirs must
	// not get the controller's token.
	Hosts []string
	// CABundle is PEM certificates to trust besides the system's (a
	// self-hosted server's own CA).
	CABundle []byte
}

func (a *Auth) method(repoURL string) (transport.AuthMethod, error) {
	u, err := url.Parse(repoURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "file") {
		return nil, fmt.Errorf("%w: the controller reaches Git over HTTPS with a token, and %s is not an HTTPS URL: propose it with %s, which uses your own Git credentials", ErrCannotPropose, redact.Text(repoURL), next.ProposeAny())
	}
	if a.Token == "" || u.Scheme == "file" {
		return nil, nil
	}
	host := strings.ToLower(u.Hostname())
	if u.Port() != "" && u.Port() != "443" {
		host += ":" + u.Port()
	}
	if u.Scheme != "https" || !slices.Contains(a.Hosts, host) {
		return nil, fmt.Errorf("%w: the controller sends its Git token only over HTTPS to %s, not to %s://%s: add the host with --propose-git-host if it is yours, or propose with %s", ErrCannotPropose, strings.Join(a.Hosts, ", "), u.Scheme, host, next.ProposeAny())
	}
	user := a.Username
	if user == "" {
		user = "x-access-token"
	}
	return &githttp.BasicAuth{Username: user, Password: a.Token}, nil
}

// localGit serves file:// repositories in process (the git binary serves
// them otherwise), so that a controller with no git reads the test
// environment's repository as it reads a remote one.
var localGit sync.Once

type gitDirLoader struct{}

// Load opens the repository at ep's path: a bare one, or the .git of a
// working copy.
func (gitDirLoader) Load(ep *transport.Endpoint) (storer.Storer, error) {
	dir := ep.Path
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		dir = filepath.Join(dir, ".git")
	}
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err != nil {
		return nil, transport.ErrRepositoryNotFound
	}
	return filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRUDefault()), nil
}

// cloneInProcess is Clone with no git binary.
func cloneInProcess(ctx context.Context, source Source, dir, author string, auth *Auth) (*Repo, error) {
	method, err := auth.method(source.RepoURL)
	if err != nil {
		return nil, err
	}
	localGit.Do(func() { client.InstallProtocol("file", server.NewServer(gitDirLoader{})) })
	r := &Repo{Dir: dir, URL: source.RepoURL, Author: author, auth: method, caBundle: auth.CABundle, inProcess: true}
	refs, err := r.list(ctx)
	if err != nil {
		return nil, err
	}
	switch rev := source.TargetRevision; rev {
	case "", "HEAD":
		r.Base = defaultBranch(refs)
		if r.Base == "" {
			return nil, fmt.Errorf("%w: %s names no default branch", ErrCannotPropose, redact.Text(source.RepoURL))
		}
	default:
		r.Base = strings.TrimPrefix(rev, "refs/heads/")
		if _, ok := refs[plumbing.NewBranchReferenceName(r.Base)]; !ok {
			return nil, fmt.Errorf("%w: targetRevision %s is not a branch of %s (a tag or a commit), so a merged change would not move the Application; change it by hand", ErrCannotPropose, rev, redact.Text(source.RepoURL))
		}
	}
	depth := 1 // the branch's tip is all a proposal needs
	if strings.HasPrefix(source.RepoURL, "file://") {
		depth = 0 // served in process, which has no shallow clones
	}
	r.repo, err = git.PlainCloneContext(ctx, dir, false, &git.CloneOptions{
		URL: source.RepoURL, Auth: method, ReferenceName: plumbing.NewBranchReferenceName(r.Base), SingleBranch: true,
		Depth: depth, CABundle: auth.CABundle,
	})
	if err != nil {
		return nil, gitError("clone", err)
	}
	return r, nil
}

// list is the remote's references by name.
func (r *Repo) list(ctx context.Context) (map[plumbing.ReferenceName]*plumbing.Reference, error) {
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{r.URL}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: r.auth, CABundle: r.caBundle})
	if err != nil {
		return nil, gitError("ls-remote", err)
	}
	out := map[plumbing.ReferenceName]*plumbing.Reference{}
	for _, ref := range refs {
		out[ref.Name()] = ref
	}
	return out, nil
}

// defaultBranch is the branch HEAD names: the symbolic reference where the
// server says it, else the one branch at HEAD's commit.
func defaultBranch(refs map[plumbing.ReferenceName]*plumbing.Reference) string {
	head := refs[plumbing.HEAD]
	if head == nil {
		return ""
	}
	if head.Type() == plumbing.SymbolicReference {
		if !head.Target().IsBranch() {
			return ""
		}
		return head.Target().Short()
	}
	var at []string
	for name, ref := range refs {
		if name.IsBranch() && ref.Hash() == head.Hash() {
			at = append(at, name.Short())
		}
	}
	if len(at) != 1 {
		return "" // ambiguous: nothing is guessed
	}
	return at[0]
}

func (r *Repo) headInProcess() (string, error) {
	head, err := r.repo.Head()
	if err != nil {
		return "", gitError("rev-parse", err)
	}
	return head.Hash().String(), nil
}

// RemoteBranchExists is whether the repository at repoURL has branch, asked
// of the remote alone (ls-remote, in process), with auth's token where it
// may be sent: for the controller, to tell a proposal that was pushed from
// one recorded in someone's own name and never pushed.
func RemoteBranchExists(ctx context.Context, repoURL, branch string, auth *Auth) (bool, error) {
	method, err := auth.method(repoURL)
	if err != nil {
		return false, err
	}
	localGit.Do(func() { client.InstallProtocol("file", server.NewServer(gitDirLoader{})) })
	r := &Repo{URL: repoURL, auth: method, caBundle: auth.CABundle, inProcess: true}
	return r.branchExistsInProcess(ctx, branch)
}

func (r *Repo) branchExistsInProcess(ctx context.Context, branch string) (bool, error) {
	refs, err := r.list(ctx)
	if err != nil {
		return false, err
	}
	_, ok := refs[plumbing.NewBranchReferenceName(branch)]
	return ok, nil
}

func (r *Repo) commitInProcess(branch, message string, files []File) (string, error) {
	w, err := r.repo.Worktree()
	if err != nil {
		return "", gitError("checkout", err)
	}
	if err := w.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(branch), Create: true}); err != nil {
		return "", gitError("checkout", err)
	}
	for _, f := range files {
		if err := r.write(f); err != nil {
			return "", err
		}
		if _, err := w.Add(f.Path); err != nil {
			return "", gitError("add", err)
		}
	}
	who := &object.Signature{Name: r.Author, Email: r.Author + "@kubectl-gitops.invalid", When: time.Now()}
	hash, err := w.Commit(message, &git.CommitOptions{Author: who, Committer: who})
	if err != nil {
		return "", gitError("commit", err)
	}
	return hash.String(), nil
}

func (r *Repo) pushInProcess(ctx context.Context, branch string) error {
	ref := "refs/heads/" + branch
	err := r.repo.PushContext(ctx, &git.PushOptions{RemoteName: "origin", Auth: r.auth, RefSpecs: []config.RefSpec{config.RefSpec(ref + ":" + ref)}, CABundle: r.caBundle})
	if errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil
	}
	return gitError("push", err)
}

// gitError names the step, with credentials taken out of URLs, as the git
// binary's errors are.
func gitError(step string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("git %s: %s", step, redact.Text(err.Error()))
}
