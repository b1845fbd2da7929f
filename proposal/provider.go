package proposal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Provider opens the request to merge a proposal's branch: a GitHub pull
// request or a GitLab merge request.
type Provider interface {
	// Name is "github" or "gitlab".
	Name() string
	// Open opens the request to merge branch into base, or finds the one
	// already open for branch.
	Open(ctx context.Context, req Request) (*Opened, error)
	// State is the request's state now: open, merged or closed.
	State(ctx context.Context, number int) (string, error)
}

// Getter reads a request whole: its state and the branch it merges.
type Getter interface {
	Get(ctx context.Context, number int) (*Opened, error)
}

// Request is a pull or merge request to open.
type Request struct {
	Branch, Base, Title, Body string
}

// Opened is a pull or merge request.
type Opened struct {
	Number int    `json:"number"`
	URL    string `json:"url"`
	State  string `json:"state"`
	// Branch is the branch the request merges (GitHub's head.ref,
	// GitLab's source_branch).
	Branch string `json:"branch,omitempty"`
}

// The states of a request, the same words for both providers.
const (
	StateOpen   = "open"
	StateMerged = "merged"
	StateClosed = "closed"
)

// ErrProvider is a refusal or failure of the provider's API.
var ErrProvider = errors.New("the Git provider's API refused the request")

// ErrNotFound is a provider's 404: the request (or project) asked for is
// not there.
var ErrNotFound = errors.New("not found")

// api is what both providers share: a base URL, a token sent in one
// header and never anywhere else, and a client with a timeout.
type api struct {
	base   string
	header string
	token  string
	client *http.Client
}

func newAPI(base, header, token string) api {
	a := api{base: strings.TrimSuffix(base, "/"), header: header, token: token}
	// The token goes to the API's own host and nowhere else: Go drops
	// Authorization on a redirect elsewhere, not GitLab's PRIVATE-TOKEN.
	a.client = &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if !a.ownHost(req.URL.String()) {
			return fmt.Errorf("%w: a redirect to %s, away from the API's host", ErrProvider, req.URL.Host)
		}
		return nil
	}}
	return a
}

// ownHost is whether target is on the API's scheme and host.
func (a api) ownHost(target string) bool {
	t, err := url.Parse(target)
	b, berr := url.Parse(a.base)
	return err == nil && berr == nil && t.Scheme == b.Scheme && t.Host == b.Host
}

// do sends a request to path (or a full URL from a Link header) and
// decodes the JSON answer into out; it returns the response's headers.
func (a api) do(ctx context.Context, method, path string, body, out any) (http.Header, error) {
	target := path
	if !strings.HasPrefix(path, "http://") && !strings.HasPrefix(path, "https://") {
		target = a.base + path
	} else if !a.ownHost(path) {
		// A Link header names the next page: on the API's host alone.
		return nil, fmt.Errorf("%w: the API named a next page on another host (%s)", ErrProvider, redactURL(path))
	}
	var reader io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		reader = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, reader)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		value := a.token
		if a.header == "Authorization" {
			value = "Bearer " + a.token
		}
		req.Header.Set(a.header, value)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, redactURL(target), err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode/100 != 2 {
		var msg struct {
			Message any `json:"message"`
			Error   any `json:"error"`
		}
		_ = json.Unmarshal(data, &msg)
		detail := fmt.Sprint(msg.Message)
		if msg.Message == nil {
			detail = fmt.Sprint(msg.Error)
		}
		err := fmt.Errorf("%w: %s %s: %s: %s", ErrProvider, method, redactURL(target), resp.Status, detail)
		if resp.StatusCode == http.StatusNotFound {
			err = fmt.Errorf("%w (%w)", err, ErrNotFound)
		}
		return resp.Header, err
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.Header, fmt.Errorf("%s %s: the answer is not what the API documents: %w", method, redactURL(target), err)
		}
	}
	return resp.Header, nil
}

// redactURL is u without a query, which could carry a token.
func redactURL(u string) string {
	s, _, _ := strings.Cut(u, "?")
	return s
}

// GitHub opens pull requests through GitHub's REST API
// (https://docs.github.com/en/rest/pulls/pulls).
type GitHub struct {
	api
	owner, repo string
}

// NewGitHub is the provider for project "OWNER/REPO" at base (for
// github.com, https://api.github.com), authenticated with token.
func NewGitHub(base, project, token string) (*GitHub, error) {
	owner, repo, ok := strings.Cut(project, "/")
	if !ok || owner == "" || repo == "" || strings.Contains(repo, "/") {
		return nil, fmt.Errorf("%w: a GitHub project is OWNER/REPO, not %q", ErrProvider, project)
	}
	return &GitHub{api: newAPI(base, "Authorization", token), owner: owner, repo: repo}, nil
}

// Name implements Provider.
func (g *GitHub) Name() string { return "github" }

type githubPull struct {
	Number   int     `json:"number"`
	HTMLURL  string  `json:"html_url"`
	State    string  `json:"state"`
	MergedAt *string `json:"merged_at"`
	Head     struct {
		Ref string `json:"ref"`
	} `json:"head"`
}

func (p githubPull) opened() *Opened {
	state := p.State
	if p.MergedAt != nil && *p.MergedAt != "" {
		state = StateMerged
	}
	return &Opened{Number: p.Number, URL: p.HTMLURL, State: state, Branch: p.Head.Ref}
}

// Open implements Provider: an open pull request from branch is reused.
func (g *GitHub) Open(ctx context.Context, req Request) (*Opened, error) {
	prefix := "/repos/" + url.PathEscape(g.owner) + "/" + url.PathEscape(g.repo)
	next := prefix + "/pulls?" + url.Values{"state": {"open"}, "head": {g.owner + ":" + req.Branch}, "base": {req.Base}, "per_page": {"100"}}.Encode()
	for next != "" {
		var page []githubPull
		header, err := g.do(ctx, http.MethodGet, next, nil, &page)
		if err != nil {
			return nil, err
		}
		for _, p := range page {
			if p.Head.Ref == req.Branch {
				return p.opened(), nil
			}
		}
		next = linkNext(header.Get("Link"))
	}
	var created githubPull
	if _, err := g.do(ctx, http.MethodPost, prefix+"/pulls", map[string]any{"title": req.Title, "head": req.Branch, "base": req.Base, "body": req.Body}, &created); err != nil {
		return nil, err
	}
	return created.opened(), nil
}

// State implements Provider.
func (g *GitHub) State(ctx context.Context, number int) (string, error) {
	p, err := g.Get(ctx, number)
	if err != nil {
		return "", err
	}
	return p.State, nil
}

// Get implements Getter: the pull request as GitHub has it.
func (g *GitHub) Get(ctx context.Context, number int) (*Opened, error) {
	var p githubPull
	if _, err := g.do(ctx, http.MethodGet, "/repos/"+url.PathEscape(g.owner)+"/"+url.PathEscape(g.repo)+"/pulls/"+strconv.Itoa(number), nil, &p); err != nil {
		return nil, err
	}
	return p.opened(), nil
}

var linkRel = regexp.MustCompile(`<([^>]+)>\s*;\s*rel="?next"?`)

// linkNext is the rel="next" URL of an RFC 8288 Link header, "" for none.
func linkNext(header string) string {
	for _, part := range strings.Split(header, ",") {
		if m := linkRel.FindStringSubmatch(part); m != nil {
			return m[1]
		}
	}
	return ""
}

// GitLab opens merge requests through GitLab's REST API
// (https://docs.gitlab.com/api/merge_requests/).
type GitLab struct {
	api
	project string
}

// NewGitLab is the provider for project (its path, GROUP/…/NAME, or its
// numeric id) at base (for gitlab.com, https://gitlab.com/api/v4),
// authenticated with token.
func NewGitLab(base, project, token string) (*GitLab, error) {
	if project == "" {
		return nil, fmt.Errorf("%w: a GitLab project is its path (GROUP/NAME) or id", ErrProvider)
	}
	return &GitLab{api: newAPI(base, "PRIVATE-TOKEN", token), project: project}, nil
}

// Name implements Provider.
func (g *GitLab) Name() string { return "gitlab" }

type gitlabMR struct {
	IID          int    `json:"iid"`
	WebURL       string `json:"web_url"`
	State        string `json:"state"`
	SourceBranch string `json:"source_branch"`
}

func (m gitlabMR) opened() *Opened {
	state := m.State
	switch state {
	case "opened", "locked":
		state = StateOpen
	}
	return &Opened{Number: m.IID, URL: m.WebURL, State: state, Branch: m.SourceBranch}
}

func (g *GitLab) prefix() string {
	return "/projects/" + url.PathEscape(g.project) + "/merge_requests"
}

// Open implements Provider: an open merge request from branch is reused.
func (g *GitLab) Open(ctx context.Context, req Request) (*Opened, error) {
	page := "1"
	for page != "" {
		var mrs []gitlabMR
		header, err := g.do(ctx, http.MethodGet, g.prefix()+"?"+url.Values{"state": {"opened"}, "source_branch": {req.Branch}, "target_branch": {req.Base}, "per_page": {"100"}, "page": {page}}.Encode(), nil, &mrs)
		if err != nil {
			return nil, err
		}
		for _, m := range mrs {
			if m.SourceBranch == req.Branch {
				return m.opened(), nil
			}
		}
		page = header.Get("X-Next-Page")
	}
	var created gitlabMR
	if _, err := g.do(ctx, http.MethodPost, g.prefix(), map[string]any{"source_branch": req.Branch, "target_branch": req.Base, "title": req.Title, "description": req.Body, "remove_source_branch": true}, &created); err != nil {
		return nil, err
	}
	return created.opened(), nil
}

// State implements Provider.
func (g *GitLab) State(ctx context.Context, number int) (string, error) {
	m, err := g.Get(ctx, number)
	if err != nil {
		return "", err
	}
	return m.State, nil
}

// Get implements Getter: the merge request as GitLab has it.
func (g *GitLab) Get(ctx context.Context, number int) (*Opened, error) {
	var m gitlabMR
	if _, err := g.do(ctx, http.MethodGet, g.prefix()+"/"+strconv.Itoa(number), nil, &m); err != nil {
		return nil, err
	}
	return m.opened(), nil
}

// Detect is the provider a repository URL names and its project:
// github.com and gitlab.com by host, "" when neither.
func Detect(repoURL string) (provider, project string) {
	host, path := hostPath(repoURL)
	path = strings.TrimSuffix(strings.Trim(path, "/"), ".git")
	switch host {
	case "github.com":
		return "github", path
	case "gitlab.com":
		return "gitlab", path
	}
	return "", path
}

// DefaultAPI is the public API base of provider.
func DefaultAPI(provider string) string {
	switch provider {
	case "github":
		return "https://api.github.com"
	case "gitlab":
		return "https://gitlab.com/api/v4"
	}
	return ""
}

// hostPath splits a repository URL, https or scp-like (git@host:path).
func hostPath(repoURL string) (string, string) {
	if u, err := url.Parse(repoURL); err == nil && u.Host != "" {
		return u.Hostname(), u.Path
	}
	if at := strings.Index(repoURL, "@"); at >= 0 {
		rest := repoURL[at+1:]
		if host, path, ok := strings.Cut(rest, ":"); ok {
			return host, path
		}
	}
	return "", ""
}
