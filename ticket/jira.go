package ticket

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	jira "github.com/andygrunwald/go-jira"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
)

// Errors of a Jira call, for callers to decide between queueing, failing
// and telling the user what to fix.
var (
	// ErrUnreachable: Jira could not be reached, timed out, or kept
	// answering 429/5xx; the work can be queued and retried later.
	ErrUnreachable = errors.New("jira is unreachable")
	// ErrAuth: Jira refused the credentials (401/403).
	ErrAuth = errors.New("jira refused the credentials")
	// ErrRejected: Jira refused the request's content (400).
	ErrRejected = errors.New("jira rejected the request")
	// ErrNotFound: no such issue, or not visible to these credentials (404).
	ErrNotFound = errors.New("jira has no such issue")
	// ErrNoTransition: the configured done transition is not available.
	ErrNoTransition = errors.New("jira offers no such transition")
)

// Jira files, finds, comments on and closes reconcile tickets.
type Jira struct {
	cfg    Config
	client *jira.Client
	base   string
	retry  *retrying
}

// Retry bounds for 429 and 5xx answers.
const (
	maxAttempts = 4
	maxWait     = 30 * time.Second
)

// New returns a client for cfg; it contacts nothing yet.
func New(cfg Config) (*Jira, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	timeout, err := cfg.timeout()
	if err != nil {
		return nil, err
	}
	network := http.DefaultTransport.(*http.Transport).Clone()
	network.DialContext = (&net.Dialer{Timeout: timeout}).DialContext
	network.TLSHandshakeTimeout = timeout
	network.ResponseHeaderTimeout = timeout
	retry := &retrying{next: network, sleep: sleepCtx}
	var transport http.RoundTripper = retry
	if cfg.PAT != "" {
		transport = &jira.PATAuthTransport{Token: cfg.PAT, Transport: transport}
	} else {
		transport = &jira.BasicAuthTransport{Username: cfg.User, Password: cfg.APIToken, Transport: transport}
	}
	base := strings.TrimSuffix(cfg.URL, "/")
	client, err := jira.NewClient(&http.Client{Transport: transport}, base)
	if err != nil {
		return nil, fmt.Errorf("JIRA_URL %q: %w", cfg.URL, err)
	}
	return &Jira{cfg: cfg, client: client, base: base, retry: retry}, nil
}

// Config returns the configuration the client was built with.
func (j *Jira) Config() Config { return j.cfg }

func (j *Jira) issue(key string) Issue {
	return Issue{Key: key, URL: j.base + "/browse/" + key}
}

// Create files the reconcile ticket of rc's patch.
func (j *Jira) Create(ctx context.Context, rc Reconcile) (Issue, error) {
	fields := &jira.IssueFields{
		Project:     jira.Project{Key: j.cfg.Project},
		Type:        jira.IssueType{Name: j.cfg.IssueType},
		Summary:     Summary(rc),
		Description: Description(rc),
		Labels:      j.cfg.labels(rc.first()),
	}
	if j.cfg.Component != "" {
		fields.Components = []*jira.Component{{Name: j.cfg.Component}}
	}
	if j.cfg.Priority != "" {
		fields.Priority = &jira.Priority{Name: j.cfg.Priority}
	}
	// The transport does not resend a create Jira may have done (5xx, a
	// timeout): look the ticket up by its session label first, so a retry
	// never files a duplicate.
	for attempt := 1; ; attempt++ {
		created, resp, err := j.client.Issue.CreateWithContext(ctx, &jira.Issue{Fields: fields})
		if err == nil {
			return j.issue(created.Key), nil
		}
		if attempt == maxAttempts || !mayHaveHappened(resp, err) || ctx.Err() != nil {
			return Issue{}, j.explain("creating the ticket", resp, err)
		}
		found, ok, findErr := j.FindSession(ctx, rc.first().Session)
		switch {
		case findErr != nil:
			return Issue{}, j.explain("creating the ticket", resp, err)
		case ok:
			return found, nil
		}
		if err := j.retry.sleep(ctx, time.Second<<(attempt-1)); err != nil {
			return Issue{}, j.explain("creating the ticket", resp, err)
		}
	}
}

// mayHaveHappened is a failed write Jira may have carried out all the same:
// a server error or no answer at all.
func mayHaveHappened(resp *jira.Response, err error) bool {
	if resp != nil && resp.Response != nil {
		return resp.StatusCode >= 500
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF)
}

// isCreate is the request that files an issue.
func isCreate(req *http.Request) bool {
	return req.Method == http.MethodPost && strings.HasSuffix(strings.TrimSuffix(req.URL.Path, "/"), "/rest/api/2/issue")
}

// FindSession looks up the ticket already filed for session, by its label.
func (j *Jira) FindSession(ctx context.Context, session string) (Issue, bool, error) {
	jql := fmt.Sprintf(`project = "%s" AND labels = "%s" ORDER BY created ASC`, jqlString(j.cfg.Project), jqlString(SessionLabel(session)))
	issues, resp, err := j.client.Issue.SearchV2JQLWithContext(ctx, jql, &jira.SearchOptionsV2{Fields: []string{"summary"}, MaxResults: 1})
	if err != nil {
		return Issue{}, false, j.explain("looking up the session's ticket", resp, err)
	}
	if len(issues) == 0 {
		return Issue{}, false, nil
	}
	return j.issue(issues[0].Key), true, nil
}

// Ready says the client can be used: New checked its configuration.
func (j *Jira) Ready() error { return nil }

// Get checks that key exists and is visible.
func (j *Jira) Get(ctx context.Context, key string) (Issue, error) {
	got, resp, err := j.client.Issue.GetWithContext(ctx, key, &jira.GetQueryOptions{Fields: "summary,status"})
	if err != nil {
		return Issue{}, j.explain("reading "+key, resp, err)
	}
	return j.issue(got.Key), nil
}

// Comment adds body (wiki markup) to key.
func (j *Jira) Comment(ctx context.Context, key, body string) error {
	// go-jira's AddComment also sends the read-only author fields; send the
	// documented body alone.
	req, err := j.client.NewRequestWithContext(ctx, http.MethodPost, "rest/api/2/issue/"+url.PathEscape(key)+"/comment", map[string]string{"body": fitField(body, "")})
	if err != nil {
		return err
	}
	resp, err := j.client.Do(req, nil)
	if err != nil {
		return j.explain("commenting on "+key, resp, err)
	}
	resp.Body.Close()
	return nil
}

// Close comments on key and moves it through the configured done
// transition, found by name among the transitions Jira offers now. An issue
// already in a done status is left there.
func (j *Jira) Close(ctx context.Context, key, comment string) error {
	if err := j.Comment(ctx, key, comment); err != nil {
		return err
	}
	got, resp, err := j.client.Issue.GetWithContext(ctx, key, &jira.GetQueryOptions{Fields: "status"})
	if err != nil {
		return j.explain("reading "+key, resp, err)
	}
	if got.Fields != nil && got.Fields.Status != nil && got.Fields.Status.StatusCategory.Key == "done" {
		return nil
	}
	transitions, resp, err := j.client.Issue.GetTransitionsWithContext(ctx, key)
	if err != nil {
		return j.explain("reading the transitions of "+key, resp, err)
	}
	var names []string
	for _, t := range transitions {
		if strings.EqualFold(t.Name, j.cfg.DoneTransition) || strings.EqualFold(t.To.Name, j.cfg.DoneTransition) {
			resp, err := j.client.Issue.DoTransitionWithContext(ctx, key, t.ID)
			if err != nil {
				return j.explain("moving "+key+" to "+t.To.Name, resp, err)
			}
			return nil
		}
		names = append(names, fmt.Sprintf("%q", t.Name))
	}
	available := "none"
	if len(names) > 0 {
		available = strings.Join(names, ", ")
	}
	return fmt.Errorf("%w: %s offers no transition %q (available: %s); set JIRA_DONE_TRANSITION to one of them", ErrNoTransition, key, j.cfg.DoneTransition, available)
}

// LinkTo adds a remote link (such as the Argo CD Application's page) to key.
func (j *Jira) LinkTo(ctx context.Context, key, url, title string) error {
	_, resp, err := j.client.Issue.AddRemoteLinkWithContext(ctx, key, &jira.RemoteLink{Object: &jira.RemoteLinkObject{URL: url, Title: title}})
	if err != nil {
		return j.explain("linking "+key, resp, err)
	}
	return nil
}

// explain turns a go-jira error into one of this package's errors with a
// line that says what to do. It never includes request headers.
func (j *Jira) explain(doing string, resp *jira.Response, err error) error {
	if resp == nil || resp.Response == nil {
		return fmt.Errorf("%w (%s at %s: %v): the ticket is queued; run `%s` once Jira answers", ErrUnreachable, doing, j.base, err, next.TicketSync())
	}
	status := resp.StatusCode
	messages := jiraMessages(resp, err)
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		vars := "JIRA_USER and JIRA_API_TOKEN (Jira Cloud: your email and an API token)"
		if j.cfg.PAT != "" {
			vars = "JIRA_PAT (Jira Data Center personal access token)"
		}
		return fmt.Errorf("%w: %s answered %d %s while %s: check %s", ErrAuth, j.base, status, http.StatusText(status), doing, vars)
	case status == http.StatusNotFound:
		return fmt.Errorf("%w: %s answered 404 while %s%s", ErrNotFound, j.base, doing, messages)
	case status == http.StatusBadRequest:
		return fmt.Errorf("%w while %s%s", ErrRejected, doing, messages)
	case status == http.StatusTooManyRequests || status >= 500:
		return fmt.Errorf("%w (%s answered %d %s while %s, after %d attempts)%s: the ticket is queued; run `%s` later",
			ErrUnreachable, j.base, status, http.StatusText(status), doing, maxAttempts, messages, next.TicketSync())
	}
	return fmt.Errorf("jira answered %d %s while %s%s", status, http.StatusText(status), doing, messages)
}

// jiraMessages renders Jira's error body {"errorMessages":[…],"errors":{…}}.
func jiraMessages(resp *jira.Response, err error) string {
	var body struct {
		ErrorMessages []string          `json:"errorMessages"`
		Errors        map[string]string `json:"errors"`
	}
	var jerr *jira.Error
	if errors.As(err, &jerr) {
		body.ErrorMessages, body.Errors = jerr.ErrorMessages, jerr.Errors
	} else if resp.Body != nil {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		_ = json.Unmarshal(data, &body)
	}
	parts := append([]string(nil), body.ErrorMessages...)
	for field, msg := range body.Errors {
		parts = append(parts, field+": "+msg)
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, "; ")
}

// jqlString escapes s for a double-quoted JQL string.
func jqlString(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// retrying resends a request Jira answered with 429 or 5xx, waiting as its
// Retry-After says (or 1s, 2s, 4s), at most maxAttempts times and never
// longer than maxWait at once.
type retrying struct {
	next  http.RoundTripper
	sleep func(context.Context, time.Duration) error
}

func (t *retrying) RoundTrip(req *http.Request) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		resp, err := t.next.RoundTrip(req)
		if err != nil || attempt == maxAttempts || !retryable(resp.StatusCode) {
			return resp, err
		}
		if isCreate(req) && resp.StatusCode != http.StatusTooManyRequests {
			// Jira may have filed it: Create looks before it resends.
			return resp, nil
		}
		wait, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		if !ok {
			wait = time.Second << (attempt - 1)
		}
		if wait > maxWait || (req.Body != nil && req.GetBody == nil) {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if err := t.sleep(req.Context(), wait); err != nil {
			return nil, err
		}
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		if d := at.Sub(now); d > 0 {
			return d, true
		}
		return 0, true
	}
	return 0, false
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// TicketWitness is an audit record a ticket witnesses.
type TicketWitness struct {
	Key string
	audit.HeadState
}

// Witnesses reads every break-glass ticket of the project (label
// breakglass), description and comments, page by page, and returns the
// audit records they witness. A search carries a page of each issue's
// comments with their total; the rest are read with the issue's comments
// call.
func (j *Jira) Witnesses(ctx context.Context) ([]TicketWitness, error) {
	jql := fmt.Sprintf(`project = "%s" AND labels = "breakglass" ORDER BY created ASC`, jqlString(j.cfg.Project))
	var out []TicketWitness
	token := ""
	for page := 0; page < 10000; page++ {
		q := url.Values{"jql": {jql}, "fields": {"description,comment"}, "maxResults": {"100"}}
		if token != "" {
			q.Set("nextPageToken", token)
		}
		req, err := j.client.NewRequestWithContext(ctx, http.MethodGet, "rest/api/2/search/jql?"+q.Encode(), nil)
		if err != nil {
			return nil, err
		}
		var res struct {
			Issues []struct {
				Key    string `json:"key"`
				Fields struct {
					Description string `json:"description"`
					Comment     struct {
						Comments []struct {
							Body string `json:"body"`
						} `json:"comments"`
						Total int `json:"total"`
					} `json:"comment"`
				} `json:"fields"`
			} `json:"issues"`
			NextPageToken string `json:"nextPageToken"`
			IsLast        bool   `json:"isLast"`
		}
		resp, err := j.client.Do(req, &res)
		if err != nil {
			return nil, j.explain("reading the break-glass tickets", resp, err)
		}
		resp.Body.Close()
		for _, issue := range res.Issues {
			text := issue.Fields.Description
			for _, c := range issue.Fields.Comment.Comments {
				text += "\n" + c.Body
			}
			if read := len(issue.Fields.Comment.Comments); issue.Fields.Comment.Total > read {
				more, err := j.comments(ctx, issue.Key, read)
				if err != nil {
					return nil, err
				}
				text += "\n" + strings.Join(more, "\n")
			}
			for _, w := range Witnesses(text) {
				out = append(out, TicketWitness{Key: issue.Key, HeadState: w})
			}
		}
		if res.IsLast || res.NextPageToken == "" {
			return out, nil
		}
		token = res.NextPageToken
	}
	return out, nil
}

// comments reads key's comments from startAt on, oldest first, page by
// page until Jira's total.
func (j *Jira) comments(ctx context.Context, key string, startAt int) ([]string, error) {
	var out []string
	for {
		q := url.Values{"startAt": {strconv.Itoa(startAt)}, "maxResults": {"100"}, "orderBy": {"created"}}
		req, err := j.client.NewRequestWithContext(ctx, http.MethodGet, "rest/api/2/issue/"+url.PathEscape(key)+"/comment?"+q.Encode(), nil)
		if err != nil {
			return nil, err
		}
		var page struct {
			Comments []struct {
				Body string `json:"body"`
			} `json:"comments"`
			Total int `json:"total"`
		}
		resp, err := j.client.Do(req, &page)
		if err != nil {
			return nil, j.explain("reading the comments of "+key, resp, err)
		}
		resp.Body.Close()
		for _, c := range page.Comments {
			out = append(out, c.Body)
		}
		startAt += len(page.Comments)
		if len(page.Comments) == 0 || startAt >= page.Total {
			return out, nil
		}
	}
}
