package proposal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// Repo is a working copy of a source's repository, cloned for one
// proposal with the git binary, so that the user's own credentials (its
// credential helpers, the SSH agent) reach the remote: this package holds
// none. Base is the branch the Application follows, which the proposal
// asks to merge into.
type Repo struct {
	Dir  string
	URL  string
	Base string
	// Author is who commits when git has no identity configured.
	Author string
	// inProcess is a copy made with no git binary (CloneWith an Auth):
	// repo is it, auth what reaches its remote.
	inProcess bool
	repo      *git.Repository
	auth      transport.AuthMethod
	caBundle  []byte
}

// Clone checks out the branch that source's targetRevision follows into
// dir. A targetRevision that is no branch (a tag, a commit) is refused:
// nothing merged would move the Application.
func Clone(ctx context.Context, source Source, dir, author string) (*Repo, error) {
	return CloneWith(ctx, source, dir, author, nil)
}

// CloneWith is Clone, in process with auth when auth is set (the
// controller), with the git binary and the user's credentials when not.
func CloneWith(ctx context.Context, source Source, dir, author string, auth *Auth) (*Repo, error) {
	if strings.HasPrefix(source.RepoURL, "-") {
		return nil, fmt.Errorf("%w: repository URL %q is not one", ErrCannotPropose, redact.Text(source.RepoURL))
	}
	if auth != nil {
		return cloneInProcess(ctx, source, dir, author, auth)
	}
	r := &Repo{Dir: dir, URL: source.RepoURL, Author: author}
	switch rev := source.TargetRevision; rev {
	case "", "HEAD":
		out, err := r.git(ctx, "", "ls-remote", "--symref", "--", source.RepoURL, "HEAD")
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(out, "\n") {
			if ref, ok := strings.CutPrefix(line, "ref: refs/heads/"); ok {
				r.Base, _, _ = strings.Cut(ref, "\t")
			}
		}
		if r.Base == "" {
			return nil, fmt.Errorf("%w: %s names no default branch", ErrCannotPropose, redact.Text(source.RepoURL))
		}
	default:
		out, err := r.git(ctx, "", "ls-remote", "--heads", "--", source.RepoURL, "refs/heads/"+strings.TrimPrefix(rev, "refs/heads/"))
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(out) == "" {
			return nil, fmt.Errorf("%w: targetRevision %s is not a branch of %s (a tag or a commit), so a merged change would not move the Application; change it by hand", ErrCannotPropose, rev, redact.Text(source.RepoURL))
		}
		r.Base = strings.TrimPrefix(rev, "refs/heads/")
	}
	if _, err := r.git(ctx, "", "clone", "--quiet", "--single-branch", "--branch", r.Base, "--", source.RepoURL, dir); err != nil {
		return nil, err
	}
	return r, nil
}

// Head is the commit checked out.
func (r *Repo) Head(ctx context.Context) (string, error) {
	if r.inProcess {
		return r.headInProcess()
	}
	return r.git(ctx, r.Dir, "rev-parse", "HEAD")
}

// BranchExists is whether the remote already has branch.
func (r *Repo) BranchExists(ctx context.Context, branch string) (bool, error) {
	if r.inProcess {
		return r.branchExistsInProcess(ctx, branch)
	}
	out, err := r.git(ctx, r.Dir, "ls-remote", "--heads", "origin", "refs/heads/"+branch)
	return strings.TrimSpace(out) != "", err
}

// Commit writes files on a new branch and commits them with message,
// returning the commit.
func (r *Repo) Commit(ctx context.Context, branch, message string, files []File) (string, error) {
	if r.inProcess {
		return r.commitInProcess(branch, message, files)
	}
	if _, err := r.git(ctx, r.Dir, "checkout", "--quiet", "-b", branch); err != nil {
		return "", err
	}
	args := []string{"add", "--"}
	for _, f := range files {
		if err := r.write(f); err != nil {
			return "", err
		}
		args = append(args, f.Path)
	}
	if _, err := r.git(ctx, r.Dir, args...); err != nil {
		return "", err
	}
	commit := []string{"commit", "--quiet", "-m", message}
	if name, _ := r.git(ctx, r.Dir, "config", "user.email"); name == "" {
		commit = append([]string{"-c", "user.name=" + r.Author, "-c", "user.email=" + r.Author + "@kubectl-gitops.invalid"}, commit...)
	}
	if _, err := r.git(ctx, r.Dir, commit...); err != nil {
		return "", err
	}
	return r.Head(ctx)
}

// Push sends branch to the remote; it never overwrites a branch there.
func (r *Repo) Push(ctx context.Context, branch string) error {
	if r.inProcess {
		return r.pushInProcess(ctx, branch)
	}
	_, err := r.git(ctx, r.Dir, "push", "--quiet", "origin", "refs/heads/"+branch+":refs/heads/"+branch)
	return err
}

// write puts f in the working copy, keeping the mode of the file it
// replaces.
func (r *Repo) write(f File) error {
	full := filepath.Join(r.Dir, filepath.FromSlash(f.Path))
	mode := os.FileMode(0o644) // a new file: a patch the proposal adds
	if info, err := os.Stat(full); err == nil {
		mode = info.Mode().Perm()
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.WriteFile(full, f.Data, mode)
}

// git runs git in dir ("" for none), never prompting: a command with no
// terminal must fail rather than wait. Its errors have credentials taken
// out of URLs.
func (r *Repo) git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if len(args) > 0 && args[len(args)-1] == "user.email" {
			return "", nil // not configured
		}
		return "", fmt.Errorf("git %s: %v: %s", args[0], err, redact.Text(strings.TrimSpace(stderr.String())))
	}
	return strings.TrimSpace(stdout.String()), nil
}
