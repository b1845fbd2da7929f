// Package gitdouble is a test double of the GitHub and GitLab REST calls
// kubectl gitops makes to propose a change, keeping to each vendor's
// documented contract: GitHub's pulls API (list with state, head, base and
// per_page, paged by the Link header's rel="next"; create, answering 422
// "Validation Failed" for a missing head branch or a pull request already
// open for it; get one; Bearer or token authentication, 401 "Bad
// credentials") and GitLab's merge requests API (list with state,
// source_branch, target_branch, per_page and page, paged by X-Next-Page;
// create, answering 409 when one is already open for the source branch;
// get one by iid; PRIVATE-TOKEN or Bearer authentication, the project by
// id or URL-encoded path). It records every request and fails the test on
// any request it does not implement. Tests and the demo only: never
// imported by the product.
package gitdouble

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// TB is what the double needs of a test: a way to fail it loudly.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
}

// Kind is the vendor a double plays.
type Kind string

// The vendors.
const (
	GitHub Kind = "github"
	GitLab Kind = "gitlab"
)

// Options shape a double.
type Options struct {
	Kind Kind
	// Project is OWNER/REPO on GitHub, the project's path on GitLab.
	Project string
	Token   string
	// PageSize is the most requests a list page holds, whatever per_page
	// asks: a client must follow the paging to the last page. Default 100.
	PageSize int
	// HasBranch says whether the repository has a branch; nil: every
	// branch exists.
	HasBranch func(branch string) bool
}

// Change is a pull or merge request as the double stores it.
type Change struct {
	Number       int
	Title, Body  string
	Head, Base   string
	State        string // open or closed (GitHub), opened, closed or merged (GitLab)
	Merged       bool
	RemoveSource bool
}

// Request is one request the double received.
type Request struct {
	Method, Path string
	Query        url.Values
	Body         string
	Status       int
}

// Server is a running double.
type Server struct {
	URL string
	tb  TB
	srv *httptest.Server

	mu       sync.Mutex
	opts     Options
	changes  []*Change
	requests []Request
}

// Start starts a double; Close stops it.
func Start(tb TB, opts Options) *Server {
	if opts.PageSize == 0 {
		opts.PageSize = 100
	}
	s := &Server{tb: tb, opts: opts}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// API is the base URL a client is configured with: the server for GitHub
// (as https://api.github.com), /api/v4 on it for GitLab.
func (s *Server) API() string {
	if s.opts.Kind == GitLab {
		return s.URL + "/api/v4"
	}
	return s.URL
}

// Close stops the double.
func (s *Server) Close() { s.srv.Close() }

// Requests is every request received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Changes is every pull or merge request, in order of creation.
func (s *Server) Changes() []Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Change, len(s.changes))
	for i, c := range s.changes {
		out[i] = *c
	}
	return out
}

// Add stores a request as if someone had opened it, and returns its number.
func (s *Server) Add(c Change) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.Number = len(s.changes) + 1
	if c.State == "" {
		c.State = s.openState()
	}
	s.changes = append(s.changes, &c)
	return c.Number
}

// Merge marks request number merged, as the vendor does when someone
// merges it (the test merges the branch in the repository itself).
func (s *Server) Merge(number int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.changes[number-1]
	c.Merged = true
	c.State = "closed"
	if s.opts.Kind == GitLab {
		c.State = "merged"
	}
}

func (s *Server) openState() string {
	if s.opts.Kind == GitLab {
		return "opened"
	}
	return "open"
}

type answer struct {
	status int
	body   any
	header http.Header
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	a := s.answer(r, body)
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.Query(), Body: string(body), Status: a.status})
	s.mu.Unlock()
	for k, v := range a.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_ = json.NewEncoder(w).Encode(a.body)
}

func (s *Server) unknown(r *http.Request, why string) answer {
	s.tb.Helper()
	s.tb.Errorf("gitdouble (%s): %s %s: %s", s.opts.Kind, r.Method, r.URL.String(), why)
	return answer{status: http.StatusNotFound, body: map[string]any{"message": "Not Found"}}
}

func (s *Server) answer(r *http.Request, body []byte) answer {
	if !s.authorized(r) {
		if s.opts.Kind == GitLab {
			return answer{status: http.StatusUnauthorized, body: map[string]any{"message": "401 Unauthorized"}}
		}
		return answer{status: http.StatusUnauthorized, body: map[string]any{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}}
	}
	if s.opts.Kind == GitLab {
		return s.gitlab(r, body)
	}
	return s.github(r, body)
}

func (s *Server) authorized(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	if s.opts.Kind == GitLab && r.Header.Get("PRIVATE-TOKEN") != "" {
		return r.Header.Get("PRIVATE-TOKEN") == s.opts.Token
	}
	return auth == "Bearer "+s.opts.Token || s.opts.Kind == GitHub && auth == "token "+s.opts.Token
}

// query checks that q names only parameters the endpoint documents.
func (s *Server) query(r *http.Request, allowed ...string) bool {
	for k := range r.URL.Query() {
		if !contains(allowed, k) {
			s.unknown(r, "query parameter "+k+" is not one the endpoint takes")
			return false
		}
	}
	return true
}

// page is the items of page (1-based) of perPage, capped at PageSize, and
// whether there is a next one.
func (s *Server) page(items []*Change, q url.Values) ([]*Change, int, bool) {
	per := s.opts.PageSize
	if n, err := strconv.Atoi(q.Get("per_page")); err == nil && n > 0 && n < per {
		per = n
	}
	page := 1
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 0 {
		page = n
	}
	from := (page - 1) * per
	if from > len(items) {
		from = len(items)
	}
	to := min(from+per, len(items))
	return items[from:to], page, to < len(items)
}

func (s *Server) github(r *http.Request, body []byte) answer {
	prefix := "/repos/" + s.opts.Project + "/pulls"
	path := r.URL.Path
	switch {
	case path == prefix && r.Method == http.MethodGet:
		if !s.query(r, "state", "head", "base", "sort", "direction", "per_page", "page") {
			return answer{status: http.StatusNotFound}
		}
		q := r.URL.Query()
		var matched []*Change
		for _, c := range s.changes {
			state := q.Get("state")
			if state == "" {
				state = "open"
			}
			if (state == "all" || c.State == state) &&
				(q.Get("head") == "" || q.Get("head") == s.owner()+":"+c.Head) &&
				(q.Get("base") == "" || q.Get("base") == c.Base) {
				matched = append(matched, c)
			}
		}
		items, page, more := s.page(matched, q)
		header := http.Header{}
		if more {
			next := *r.URL
			nq := next.Query()
			nq.Set("page", strconv.Itoa(page+1))
			next.RawQuery = nq.Encode()
			header.Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, s.URL, next.RequestURI()))
		}
		out := []any{}
		for _, c := range items {
			out = append(out, s.pull(c))
		}
		return answer{status: http.StatusOK, body: out, header: header}
	case path == prefix && r.Method == http.MethodPost:
		var req struct {
			Title               string `json:"title"`
			Head                string `json:"head"`
			Base                string `json:"base"`
			Body                string `json:"body"`
			Draft               bool   `json:"draft"`
			MaintainerCanModify bool   `json:"maintainer_can_modify"`
		}
		if !s.strict(r, body, &req) {
			return answer{status: http.StatusBadRequest, body: map[string]any{"message": "Problems parsing JSON"}}
		}
		head := strings.TrimPrefix(req.Head, s.owner()+":")
		switch {
		case req.Title == "" || head == "" || req.Base == "":
			return validation("title, head and base are required")
		case s.opts.HasBranch != nil && !s.opts.HasBranch(head):
			return validation("head: invalid")
		case s.opts.HasBranch != nil && !s.opts.HasBranch(req.Base):
			return validation("base: invalid")
		}
		for _, c := range s.changes {
			if c.Head == head && c.State == "open" {
				return validation("A pull request already exists for " + s.owner() + ":" + head + ".")
			}
		}
		c := &Change{Number: len(s.changes) + 1, Title: req.Title, Body: req.Body, Head: head, Base: req.Base, State: "open"}
		s.changes = append(s.changes, c)
		return answer{status: http.StatusCreated, body: s.pull(c)}
	case strings.HasPrefix(path, prefix+"/") && r.Method == http.MethodGet:
		n, err := strconv.Atoi(strings.TrimPrefix(path, prefix+"/"))
		if err != nil || !s.query(r) {
			return s.unknown(r, "not a pull request number")
		}
		if n < 1 || n > len(s.changes) {
			return answer{status: http.StatusNotFound, body: map[string]any{"message": "Not Found"}}
		}
		return answer{status: http.StatusOK, body: s.pull(s.changes[n-1])}
	}
	return s.unknown(r, "not a call of GitHub's pulls API that the double implements")
}

func (s *Server) owner() string {
	owner, _, _ := strings.Cut(s.opts.Project, "/")
	return owner
}

func validation(message string) answer {
	return answer{status: http.StatusUnprocessableEntity, body: map[string]any{"message": "Validation Failed", "errors": []any{map[string]any{"resource": "PullRequest", "code": "custom", "message": message}}}}
}

func (s *Server) pull(c *Change) map[string]any {
	var merged any
	if c.Merged {
		merged = "2026-01-01T00:00:00Z"
	}
	return map[string]any{
		"number": c.Number, "state": c.State, "title": c.Title, "body": c.Body, "merged_at": merged,
		"html_url": fmt.Sprintf("%s/%s/pull/%d", s.URL, s.opts.Project, c.Number),
		"url":      fmt.Sprintf("%s/repos/%s/pulls/%d", s.URL, s.opts.Project, c.Number),
		"head":     map[string]any{"ref": c.Head, "label": s.owner() + ":" + c.Head},
		"base":     map[string]any{"ref": c.Base, "label": s.owner() + ":" + c.Base},
	}
}

func (s *Server) gitlab(r *http.Request, body []byte) answer {
	path := r.URL.EscapedPath()
	id := url.PathEscape(s.opts.Project)
	var prefix string
	for _, p := range []string{id, strings.ReplaceAll(id, "/", "%2F")} {
		if strings.HasPrefix(path, "/api/v4/projects/"+p+"/merge_requests") {
			prefix = "/api/v4/projects/" + p + "/merge_requests"
		}
	}
	if prefix == "" {
		if strings.HasPrefix(path, "/api/v4/projects/") {
			return answer{status: http.StatusNotFound, body: map[string]any{"message": "404 Project Not Found"}}
		}
		return s.unknown(r, "not a call of GitLab's merge requests API that the double implements")
	}
	switch {
	case path == prefix && r.Method == http.MethodGet:
		if !s.query(r, "state", "source_branch", "target_branch", "per_page", "page", "order_by", "sort") {
			return answer{status: http.StatusNotFound}
		}
		q := r.URL.Query()
		var matched []*Change
		for _, c := range s.changes {
			if (q.Get("state") == "" || q.Get("state") == "all" || q.Get("state") == c.State) &&
				(q.Get("source_branch") == "" || q.Get("source_branch") == c.Head) &&
				(q.Get("target_branch") == "" || q.Get("target_branch") == c.Base) {
				matched = append(matched, c)
			}
		}
		items, page, more := s.page(matched, q)
		header := http.Header{}
		header.Set("X-Page", strconv.Itoa(page))
		header.Set("X-Total", strconv.Itoa(len(matched)))
		header.Set("X-Next-Page", "")
		if more {
			header.Set("X-Next-Page", strconv.Itoa(page+1))
		}
		out := []any{}
		for _, c := range items {
			out = append(out, s.mergeRequest(c))
		}
		return answer{status: http.StatusOK, body: out, header: header}
	case path == prefix && r.Method == http.MethodPost:
		var req struct {
			SourceBranch       string `json:"source_branch"`
			TargetBranch       string `json:"target_branch"`
			Title              string `json:"title"`
			Description        string `json:"description"`
			RemoveSourceBranch bool   `json:"remove_source_branch"`
		}
		if !s.strict(r, body, &req) {
			return answer{status: http.StatusBadRequest, body: map[string]any{"error": "the body is not JSON"}}
		}
		switch {
		case req.SourceBranch == "" || req.TargetBranch == "" || req.Title == "":
			return answer{status: http.StatusBadRequest, body: map[string]any{"error": "source_branch, target_branch, title are missing"}}
		case s.opts.HasBranch != nil && !s.opts.HasBranch(req.SourceBranch):
			return answer{status: http.StatusBadRequest, body: map[string]any{"message": map[string]any{"source_branch": []string{"is invalid"}}}}
		}
		for _, c := range s.changes {
			if c.Head == req.SourceBranch && c.State == "opened" {
				return answer{status: http.StatusConflict, body: map[string]any{"message": []string{fmt.Sprintf("Another open merge request already exists for this source branch: !%d", c.Number)}}}
			}
		}
		c := &Change{Number: len(s.changes) + 1, Title: req.Title, Body: req.Description, Head: req.SourceBranch, Base: req.TargetBranch, State: "opened", RemoveSource: req.RemoveSourceBranch}
		s.changes = append(s.changes, c)
		return answer{status: http.StatusCreated, body: s.mergeRequest(c)}
	case strings.HasPrefix(path, prefix+"/") && r.Method == http.MethodGet:
		n, err := strconv.Atoi(strings.TrimPrefix(path, prefix+"/"))
		if err != nil || !s.query(r) {
			return s.unknown(r, "not a merge request iid")
		}
		if n < 1 || n > len(s.changes) {
			return answer{status: http.StatusNotFound, body: map[string]any{"message": "404 Not found"}}
		}
		return answer{status: http.StatusOK, body: s.mergeRequest(s.changes[n-1])}
	}
	return s.unknown(r, "not a call of GitLab's merge requests API that the double implements")
}

func (s *Server) mergeRequest(c *Change) map[string]any {
	return map[string]any{
		"id": 1000 + c.Number, "iid": c.Number, "state": c.State, "title": c.Title, "description": c.Body,
		"source_branch": c.Head, "target_branch": c.Base,
		"web_url": fmt.Sprintf("%s/%s/-/merge_requests/%d", s.URL, s.opts.Project, c.Number),
	}
}

// strict decodes body into v, failing the test on fields the vendor's
// endpoint does not document.
func (s *Server) strict(r *http.Request, body []byte, v any) bool {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		s.unknown(r, "body: "+err.Error())
		return false
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
