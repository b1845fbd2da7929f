// Package jiradouble is a Jira REST test double that keeps to Atlassian's
// documented contract for the calls kubectl gitops makes: create and get an
// issue, add and page through comments, transitions, search (the
// /rest/api/2/search/jql call, paged by nextPageToken; the legacy
// /rest/api/2/search answers 410 as Jira Cloud now does), remote links, basic and bearer authentication, Jira's error body
// {"errorMessages":[],"errors":{}}, and injected faults (429 with
// Retry-After, 5xx, a hang). It records every request for assertions and
// fails the test on any request it does not implement. Tests and the demo
// only: never imported by the product.
package jiradouble

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// TB is what the double needs of a test: a way to fail it loudly.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
}

// Options shape a double. Exactly one of PAT or User with Token is
// accepted as credentials.
type Options struct {
	Project     string
	User, Token string
	PAT         string
	// DoneTransition names the workflow's transition to Done (default
	// "Done"), so a test can offer a workflow without the configured one.
	DoneTransition string
	// PageSize is the most issues a search page, or comments a page of
	// comments, holds, whatever maxResults asks: Jira may return fewer
	// than asked, and a client must follow nextPageToken (or startAt)
	// until the last page. Default 100.
	PageSize int
	// InlineComments is the most comments an issue's comment field holds
	// in a search or a get: a page of them with its total, as Jira
	// documents it; the rest are read with GET …/comment. 0: all.
	InlineComments int
}

// Issue is an issue as the double stores it.
type Issue struct {
	ID          string
	Key         string
	Project     string
	IssueType   string
	Summary     string
	Description string
	Labels      []string
	Components  []string
	Priority    string
	Status      string
	Comments    []string
	RemoteLinks []string
}

// Request is one request the double received.
type Request struct {
	Method string
	Path   string
	Query  url.Values
	// Auth is "basic", "bearer" or "" (none).
	Auth string
	Body string
	// Status is what the double answered.
	Status int
}

// Fault is an answer injected instead of the real one, for Times requests
// (0: every request) whose method and path prefix match ("" matches any).
type Fault struct {
	Method     string
	PathPrefix string
	Status     int
	RetryAfter string
	// Hang holds the request open until the client gives up.
	Hang bool
	// AfterProcessing does the request first and then fails (or hangs)
	// instead of answering: Jira did the work, the client never learns it.
	AfterProcessing bool
	Times           int
}

// Server is a running double.
type Server struct {
	URL  string
	opts Options
	tb   TB
	srv  *httptest.Server
	stop chan struct{}

	mu       sync.Mutex
	issues   []*Issue
	requests []Request
	faults   []*Fault
}

// Start runs a double on loopback until Close.
func Start(tb TB, opts Options) *Server {
	if opts.Project == "" {
		opts.Project = "OPS"
	}
	if opts.DoneTransition == "" {
		opts.DoneTransition = "Done"
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 100
	}
	s := &Server{opts: opts, tb: tb, stop: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the double, releasing hung requests first.
func (s *Server) Close() {
	close(s.stop)
	s.srv.Close()
}

// Inject queues a fault.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// Requests returns a copy of what the double received, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Issues returns copies of the stored issues in creation order.
func (s *Server) Issues() []Issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Issue, 0, len(s.issues))
	for _, i := range s.issues {
		c := *i
		c.Labels = append([]string(nil), i.Labels...)
		c.Comments = append([]string(nil), i.Comments...)
		out = append(out, c)
	}
	return out
}

// AddIssue stores an issue as if someone had filed it in Jira, and returns
// its key.
func (s *Server) AddIssue(summary string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.create(&Issue{Project: s.opts.Project, IssueType: "Task", Summary: summary}).Key
}

func (s *Server) create(i *Issue) *Issue {
	n := len(s.issues) + 1
	i.ID, i.Key, i.Status = strconv.Itoa(10000+n), fmt.Sprintf("%s-%d", i.Project, n), "To Do"
	s.issues = append(s.issues, i)
	return i
}

func (s *Server) find(key string) *Issue {
	for _, i := range s.issues {
		if i.Key == key || i.ID == key {
			return i
		}
	}
	return nil
}

// answer is a response the handler decided on.
type answer struct {
	status     int
	body       any
	retryAfter string
}

func errorBody(messages []string, fields map[string]string) map[string]any {
	if messages == nil {
		messages = []string{}
	}
	if fields == nil {
		fields = map[string]string{}
	}
	return map[string]any{"errorMessages": messages, "errors": fields}
}

func fail(status int, message string) answer {
	return answer{status: status, body: errorBody([]string{message}, nil)}
}

func fieldErrors(fields map[string]string) answer {
	return answer{status: http.StatusBadRequest, body: errorBody(nil, fields)}
}

var (
	issuePath       = regexp.MustCompile(`^/rest/api/2/issue/([A-Z][A-Z0-9]*-[0-9]+|[0-9]+)$`)
	commentPath     = regexp.MustCompile(`^/rest/api/2/issue/([A-Z][A-Z0-9]*-[0-9]+|[0-9]+)/comment$`)
	transitionsPath = regexp.MustCompile(`^/rest/api/2/issue/([A-Z][A-Z0-9]*-[0-9]+|[0-9]+)/transitions$`)
	remoteLinkPath  = regexp.MustCompile(`^/rest/api/2/issue/([A-Z][A-Z0-9]*-[0-9]+|[0-9]+)/remotelink$`)
)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	req := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Body: string(data), Auth: authKind(r)}

	s.mu.Lock()
	fault := s.takeFault(r)
	var a answer
	if fault != nil && fault.AfterProcessing && s.authorized(r) {
		s.route(r, data)
	}
	switch {
	case fault != nil && fault.Hang:
	case fault != nil:
		a = answer{status: fault.Status, retryAfter: fault.RetryAfter, body: errorBody([]string{"injected fault"}, nil)}
	case !s.authorized(r):
		a = fail(http.StatusUnauthorized, "You are not authenticated. Authentication required to perform this operation.")
	default:
		a = s.route(r, data)
	}
	req.Status = a.status
	s.requests = append(s.requests, req)
	s.mu.Unlock()

	if fault != nil && fault.Hang {
		select {
		case <-r.Context().Done():
		case <-s.stop:
		}
		return
	}
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	if a.retryAfter != "" {
		w.Header().Set("Retry-After", a.retryAfter)
	}
	w.WriteHeader(a.status)
	if a.body != nil {
		_ = json.NewEncoder(w).Encode(a.body)
	}
}

func (s *Server) takeFault(r *http.Request) *Fault {
	for i, f := range s.faults {
		if (f.Method == "" || f.Method == r.Method) && strings.HasPrefix(r.URL.Path, f.PathPrefix) {
			if f.Times > 0 {
				if f.Times--; f.Times == 0 {
					s.faults = append(s.faults[:i], s.faults[i+1:]...)
				}
			}
			c := *f
			return &c
		}
	}
	return nil
}

func authKind(r *http.Request) string {
	h := r.Header.Get("Authorization")
	switch {
	case strings.HasPrefix(h, "Basic "):
		return "basic"
	case strings.HasPrefix(h, "Bearer "):
		return "bearer"
	}
	return ""
}

func (s *Server) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	if s.opts.PAT != "" {
		return h == "Bearer "+s.opts.PAT
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(s.opts.User+":"+s.opts.Token))
	return h == want
}

// route answers the implemented calls; anything else fails the test.
func (s *Server) route(r *http.Request, body []byte) answer {
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && p == "/rest/api/2/issue":
		return s.createIssue(body)
	case r.Method == http.MethodGet && issuePath.MatchString(p):
		return s.getIssue(issuePath.FindStringSubmatch(p)[1], r.URL.Query())
	case r.Method == http.MethodPost && commentPath.MatchString(p):
		return s.addComment(commentPath.FindStringSubmatch(p)[1], body)
	case r.Method == http.MethodGet && commentPath.MatchString(p):
		return s.getComments(commentPath.FindStringSubmatch(p)[1], r.URL.Query())
	case r.Method == http.MethodGet && transitionsPath.MatchString(p):
		return s.getTransitions(transitionsPath.FindStringSubmatch(p)[1])
	case r.Method == http.MethodPost && transitionsPath.MatchString(p):
		return s.doTransition(transitionsPath.FindStringSubmatch(p)[1], body)
	case r.Method == http.MethodPost && remoteLinkPath.MatchString(p):
		return s.addRemoteLink(remoteLinkPath.FindStringSubmatch(p)[1], body)
	case r.Method == http.MethodGet && p == "/rest/api/2/search/jql":
		return s.search(r.URL.Query())
	case p == "/rest/api/2/search":
		return fail(http.StatusGone, "The requested API has been removed. Please migrate to the /rest/api/3/search/jql API.")
	}
	s.tb.Helper()
	s.tb.Errorf("jira double: unimplemented request %s %s (body %.200s)", r.Method, r.URL.RequestURI(), body)
	return fail(http.StatusNotImplemented, "not implemented by the test double: "+r.Method+" "+p)
}

// decodeStrict decodes body into v, naming an unknown member as Jira does.
func (s *Server) decodeStrict(body []byte, v any) (answer, bool) {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		s.tb.Helper()
		s.tb.Errorf("jira double: request body it does not understand: %v: %.300s", err, body)
		return fail(http.StatusBadRequest, "Unrecognized field or malformed JSON: "+err.Error()), false
	}
	return answer{}, true
}

// issueRequest decodes a request body about issue key, answering as Jira
// does for a member it does not know or an issue that does not exist.
func (s *Server) issueRequest(key string, body []byte, v any) (*Issue, *answer) {
	if a, ok := s.decodeStrict(body, v); !ok {
		return nil, &a
	}
	i := s.find(key)
	if i == nil {
		a := notFound()
		return nil, &a
	}
	return i, nil
}

type named struct {
	Name string `json:"name"`
	Key  string `json:"key,omitempty"`
	ID   string `json:"id,omitempty"`
}

func (s *Server) createIssue(body []byte) answer {
	var in struct {
		Fields map[string]json.RawMessage `json:"fields"`
	}
	if a, ok := s.decodeStrict(body, &in); !ok {
		return a
	}
	errs := map[string]string{}
	issue := &Issue{}
	str := func(field string) string {
		var v string
		if raw, ok := in.Fields[field]; ok && json.Unmarshal(raw, &v) != nil {
			errs[field] = "Operation value must be a string"
		}
		return v
	}
	ref := func(field string) named {
		var v named
		if raw, ok := in.Fields[field]; ok && json.Unmarshal(raw, &v) != nil {
			errs[field] = "Could not find valid 'id' or 'key' in " + field + " object."
		}
		return v
	}
	for field := range in.Fields {
		switch field {
		case "project", "issuetype", "summary", "description", "labels", "components", "priority":
		default:
			errs[field] = fmt.Sprintf("Field '%s' cannot be set. It is not on the appropriate screen, or unknown.", field)
		}
	}
	project := ref("project")
	switch {
	case project.Key == "" && project.ID == "":
		errs["project"] = "Specify a valid project ID or key"
	case project.Key != s.opts.Project:
		errs["project"] = "valid project is required"
	}
	issue.Project = project.Key
	if issue.IssueType = ref("issuetype").Name; issue.IssueType == "" {
		errs["issuetype"] = "Specify an issue type"
	} else if issue.IssueType != "Task" && issue.IssueType != "Bug" {
		errs["issuetype"] = "Specify a valid issue type"
	}
	switch issue.Summary = str("summary"); {
	case strings.TrimSpace(issue.Summary) == "":
		errs["summary"] = "You must specify a summary of the issue."
	case utf8.RuneCountInString(issue.Summary) > 255:
		errs["summary"] = "Summary must be less than 255 characters."
	case strings.ContainsAny(issue.Summary, "\r\n"):
		errs["summary"] = "The summary is invalid because it contains newline characters."
	}
	if issue.Description = str("description"); utf8.RuneCountInString(issue.Description) > 32767 {
		errs["description"] = "The entered text is too long. It exceeds the allowed limit of 32,767 characters."
	}
	if raw, ok := in.Fields["labels"]; ok {
		if err := json.Unmarshal(raw, &issue.Labels); err != nil {
			errs["labels"] = "Operation value must be an array of strings"
		}
		for _, l := range issue.Labels {
			if strings.ContainsAny(l, " \t\n") || l == "" || utf8.RuneCountInString(l) > 255 {
				errs["labels"] = fmt.Sprintf("The label '%s' contains spaces which is invalid.", l)
			}
		}
	}
	if raw, ok := in.Fields["components"]; ok {
		var comps []named
		if err := json.Unmarshal(raw, &comps); err != nil {
			errs["components"] = "Operation value must be an array of objects"
		}
		for _, c := range comps {
			issue.Components = append(issue.Components, c.Name)
		}
	}
	issue.Priority = ref("priority").Name
	if len(errs) > 0 {
		return fieldErrors(errs)
	}
	s.create(issue)
	return answer{status: http.StatusCreated, body: map[string]string{"id": issue.ID, "key": issue.Key, "self": s.URL + "/rest/api/2/issue/" + issue.ID}}
}

func notFound() answer {
	return fail(http.StatusNotFound, "Issue does not exist or you do not have permission to see it.")
}

func (s *Server) issueJSON(i *Issue, fields ...string) map[string]any {
	category := "new"
	switch i.Status {
	case "In Progress":
		category = "indeterminate"
	case "Done":
		category = "done"
	}
	f := map[string]any{
		"summary": i.Summary, "labels": i.Labels,
		"issuetype": map[string]string{"name": i.IssueType},
		"project":   map[string]string{"key": i.Project},
		"status":    map[string]any{"name": i.Status, "statusCategory": map[string]string{"key": category}},
	}
	// Like Jira, the text fields come only when asked for.
	for _, name := range fields {
		switch name {
		case "description":
			f["description"] = i.Description
		case "comment":
			inline := len(i.Comments)
			if s.opts.InlineComments > 0 {
				inline = min(inline, s.opts.InlineComments)
			}
			f["comment"] = s.commentPage(i, i.Comments[:inline], 0, inline)
		}
	}
	return map[string]any{"id": i.ID, "key": i.Key, "self": s.URL + "/rest/api/2/issue/" + i.ID, "fields": f}
}

func (s *Server) getIssue(key string, q url.Values) answer {
	for k := range q {
		if k != "fields" && k != "expand" {
			s.tb.Helper()
			s.tb.Errorf("jira double: get issue with unknown parameter %q", k)
		}
	}
	i := s.find(key)
	if i == nil {
		return notFound()
	}
	return answer{status: http.StatusOK, body: s.issueJSON(i, strings.Split(q.Get("fields"), ",")...)}
}

func (s *Server) addComment(key string, body []byte) answer {
	var in struct {
		Body       string         `json:"body"`
		Visibility map[string]any `json:"visibility"`
	}
	i, failed := s.issueRequest(key, body, &in)
	switch {
	case failed != nil:
		return *failed
	case strings.TrimSpace(in.Body) == "":
		return fieldErrors(map[string]string{"comment": "Comment body can not be empty!"})
	case utf8.RuneCountInString(in.Body) > 32767:
		return fieldErrors(map[string]string{"comment": "The entered text is too long. It exceeds the allowed limit of 32,767 characters."})
	}
	i.Comments = append(i.Comments, in.Body)
	id := strconv.Itoa(20000 + len(i.Comments))
	return answer{status: http.StatusCreated, body: map[string]any{"id": id, "self": s.URL + "/rest/api/2/issue/" + i.ID + "/comment/" + id, "body": in.Body}}
}

// commentPage is a page of i's comments as Jira answers it: the comments
// from startAt, the most a page could hold, and the total.
func (s *Server) commentPage(i *Issue, page []string, startAt, maxResults int) map[string]any {
	comments := []map[string]any{}
	for n, body := range page {
		id := strconv.Itoa(20001 + startAt + n)
		comments = append(comments, map[string]any{"id": id, "self": s.URL + "/rest/api/2/issue/" + i.ID + "/comment/" + id, "body": body})
	}
	return map[string]any{"comments": comments, "total": len(i.Comments), "startAt": startAt, "maxResults": maxResults}
}

// getComments implements GET /rest/api/2/issue/KEY/comment: the comments
// from startAt (default 0), at most maxResults (default 100, and never more
// than PageSize), oldest first unless orderBy is -created.
func (s *Server) getComments(key string, q url.Values) answer {
	for k := range q {
		switch k {
		case "startAt", "maxResults", "orderBy":
		default:
			s.tb.Helper()
			s.tb.Errorf("jira double: get comments with unknown parameter %q", k)
			return fail(http.StatusBadRequest, "unsupported parameter "+k)
		}
	}
	i := s.find(key)
	if i == nil {
		return notFound()
	}
	startAt, limit := 0, 100
	if v := q.Get("startAt"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fail(http.StatusBadRequest, "startAt must be a non-negative integer")
		}
		startAt = n
	}
	if v := q.Get("maxResults"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fail(http.StatusBadRequest, "maxResults must be a non-negative integer")
		}
		limit = n
	}
	limit = min(limit, s.opts.PageSize)
	ordered := i.Comments
	switch q.Get("orderBy") {
	case "", "created", "+created":
	case "-created":
		ordered = slices.Clone(i.Comments)
		slices.Reverse(ordered)
	default:
		return fail(http.StatusBadRequest, "orderBy accepts created, +created or -created")
	}
	start := min(startAt, len(ordered))
	page := s.commentPage(i, ordered[start:min(start+limit, len(ordered))], startAt, limit)
	return answer{status: http.StatusOK, body: page}
}

type transition struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	To   string `json:"-"`
}

// transitions is the double's workflow: To Do → In Progress → Done, and
// back again.
func (s *Server) transitions(status string) []transition {
	switch status {
	case "To Do":
		return []transition{{"11", "Start Progress", "In Progress"}, {"31", s.opts.DoneTransition, "Done"}}
	case "In Progress":
		return []transition{{"21", "Stop Progress", "To Do"}, {"31", s.opts.DoneTransition, "Done"}}
	}
	return []transition{{"41", "Reopen", "To Do"}}
}

func (s *Server) getTransitions(key string) answer {
	i := s.find(key)
	if i == nil {
		return notFound()
	}
	var out []map[string]any
	for _, t := range s.transitions(i.Status) {
		out = append(out, map[string]any{"id": t.ID, "name": t.Name, "to": map[string]string{"name": t.To}, "fields": map[string]any{}})
	}
	return answer{status: http.StatusOK, body: map[string]any{"expand": "transitions", "transitions": out}}
}

func (s *Server) doTransition(key string, body []byte) answer {
	var in struct {
		Transition struct {
			ID string `json:"id"`
		} `json:"transition"`
		Update map[string]json.RawMessage `json:"update"`
		Fields map[string]json.RawMessage `json:"fields"`
	}
	i, failed := s.issueRequest(key, body, &in)
	if failed != nil {
		return *failed
	}
	if len(in.Update) > 0 || len(in.Fields) > 0 {
		return fieldErrors(map[string]string{"fields": "this workflow's transitions have no screen: fields and update cannot be set"})
	}
	for _, t := range s.transitions(i.Status) {
		if t.ID == in.Transition.ID {
			i.Status = t.To
			return answer{status: http.StatusNoContent}
		}
	}
	return fail(http.StatusBadRequest, fmt.Sprintf("Transition id '%s' is not valid for this issue.", in.Transition.ID))
}

func (s *Server) addRemoteLink(key string, body []byte) answer {
	var in struct {
		GlobalID     string `json:"globalId"`
		Relationship string `json:"relationship"`
		Object       *struct {
			URL   string `json:"url"`
			Title string `json:"title"`
		} `json:"object"`
	}
	i, failed := s.issueRequest(key, body, &in)
	switch {
	case failed != nil:
		return *failed
	case in.Object == nil || in.Object.URL == "" || in.Object.Title == "":
		return fieldErrors(map[string]string{"object": "'object' with 'url' and 'title' is required"})
	}
	i.RemoteLinks = append(i.RemoteLinks, in.Object.URL)
	id := 30000 + len(i.RemoteLinks)
	return answer{status: http.StatusCreated, body: map[string]any{"id": id, "self": fmt.Sprintf("%s/rest/api/2/issue/%s/remotelink/%d", s.URL, i.Key, id)}}
}

// jqlClause is `field = "value"` or `field = value`.
var jqlClause = regexp.MustCompile(`^(project|labels|key)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([A-Za-z0-9_.:-]+))$`)

// search implements GET /rest/api/2/search/jql for conjunctions of
// equality clauses on project, labels and key, ordered by created.
func (s *Server) search(q url.Values) answer {
	jql := q.Get("jql")
	for k := range q {
		switch k {
		case "jql", "fields", "maxResults", "nextPageToken":
		default:
			s.tb.Helper()
			s.tb.Errorf("jira double: search with unknown parameter %q", k)
		}
	}
	if strings.TrimSpace(jql) == "" {
		// Jira Cloud refuses unbounded queries on this endpoint.
		return fail(http.StatusBadRequest, "Unbounded JQL queries are not allowed here. Please add a search restriction to your query.")
	}
	desc := false
	if where, order, ok := strings.Cut(jql, " ORDER BY "); ok {
		jql = where
		switch strings.TrimSpace(order) {
		case "created ASC", "created":
		case "created DESC":
			desc = true
		default:
			s.tb.Helper()
			s.tb.Errorf("jira double: JQL ordering it does not implement: %q", order)
			return fail(http.StatusBadRequest, "Error in the JQL Query: unsupported ORDER BY")
		}
	}
	type clause struct{ field, value string }
	var clauses []clause
	for _, part := range strings.Split(jql, " AND ") {
		m := jqlClause.FindStringSubmatch(strings.TrimSpace(part))
		if m == nil {
			s.tb.Helper()
			s.tb.Errorf("jira double: JQL it does not implement: %q", part)
			return fail(http.StatusBadRequest, fmt.Sprintf("Error in the JQL Query: %q", part))
		}
		value := m[3]
		if m[3] == "" {
			value = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(m[2])
		}
		clauses = append(clauses, clause{m[1], value})
	}
	var hits []*Issue
	for _, i := range s.issues {
		match := true
		for _, c := range clauses {
			switch c.field {
			case "project":
				match = match && i.Project == c.value
			case "key":
				match = match && i.Key == c.value
			case "labels":
				match = match && contains(i.Labels, c.value)
			}
		}
		if match {
			hits = append(hits, i)
		}
	}
	if desc {
		slices.Reverse(hits)
	}
	start := 0
	if token := q.Get("nextPageToken"); token != "" {
		n, ok := pageStart(token, q.Get("jql"))
		if !ok || n > len(hits) {
			return fail(http.StatusBadRequest, "The provided next page token is invalid or expired.")
		}
		start = n
	}
	limit := 50
	if m, err := strconv.Atoi(q.Get("maxResults")); err == nil && m > 0 {
		limit = m
	}
	end := min(start+min(limit, s.opts.PageSize), len(hits))
	issues := []map[string]any{}
	for _, i := range hits[start:end] {
		issues = append(issues, s.issueJSON(i, strings.Split(q.Get("fields"), ",")...))
	}
	body := map[string]any{"issues": issues, "isLast": end == len(hits)}
	if end < len(hits) {
		// As Jira Cloud does, the last page has no nextPageToken at all.
		body["nextPageToken"] = pageToken(q.Get("jql"), end)
	}
	return answer{status: http.StatusOK, body: body}
}

// pageToken is the opaque nextPageToken of the page of jql's results that
// starts at start; a token is good for its own query only.
func pageToken(jql string, start int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(start) + "\x00" + jql))
}

// pageStart reads a pageToken for jql.
func pageStart(token, jql string) (int, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return 0, false
	}
	start, query, ok := strings.Cut(string(raw), "\x00")
	n, err := strconv.Atoi(start)
	return n, ok && err == nil && n >= 0 && query == jql
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
