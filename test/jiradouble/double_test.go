package jiradouble

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// recorder is a TB that keeps what the double reported.
type recorder struct{ errors []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func call(t *testing.T, s *Server, method, path, body string, auth bool) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth {
		req.SetBasicAuth("u@example.com", "tok")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return resp.StatusCode, out
}

func TestTheDoubleKeepsJirasContract(t *testing.T) {
	rec := &recorder{}
	s := Start(rec, Options{Project: "OPS", User: "u@example.com", Token: "tok"})
	defer s.Close()

	if code, body := call(t, s, "GET", "/rest/api/2/issue/OPS-1", "", false); code != 401 || body["errorMessages"] == nil {
		t.Errorf("no credentials: %d %v", code, body)
	}
	code, body := call(t, s, "POST", "/rest/api/2/issue", `{"fields":{"project":{"key":"OPS"}}}`, true)
	errs, _ := body["errors"].(map[string]any)
	if code != 400 || errs["summary"] != "You must specify a summary of the issue." || errs["issuetype"] != "Specify an issue type" {
		t.Errorf("missing required fields: %d %v", code, body)
	}
	if msgs, ok := body["errorMessages"].([]any); !ok || len(msgs) != 0 {
		t.Errorf("error body lacks an empty errorMessages array: %v", body)
	}
	code, body = call(t, s, "POST", "/rest/api/2/issue", `{"fields":{"project":{"key":"OPS"},"issuetype":{"name":"Task"},"summary":"s","customfield_1":"x"}}`, true)
	if errs, _ := body["errors"].(map[string]any); code != 400 || !strings.Contains(fmt.Sprint(errs["customfield_1"]), "cannot be set") {
		t.Errorf("unknown field: %d %v", code, body)
	}
	if code, _ := call(t, s, "GET", "/rest/api/2/search?jql=project%3DOPS", "", true); code != 410 {
		t.Errorf("legacy search answered %d, want 410 Gone", code)
	}
	if code, body := call(t, s, "GET", "/rest/api/2/search/jql", "", true); code != 400 || body["errorMessages"] == nil {
		t.Errorf("unbounded search: %d %v", code, body)
	}
	if len(rec.errors) != 0 {
		t.Fatalf("documented calls were reported: %v", rec.errors)
	}

	// Anything it does not implement fails the test loudly.
	if code, _ := call(t, s, "DELETE", "/rest/api/2/issue/OPS-1", "", true); code != 501 {
		t.Errorf("unimplemented call answered %d", code)
	}
	if code, _ := call(t, s, "GET", "/rest/api/2/search/jql?jql=summary+~+%22x%22", "", true); code != 400 {
		t.Errorf("unimplemented JQL answered %d", code)
	}
	if len(rec.errors) != 2 || !strings.Contains(rec.errors[0], "unimplemented request DELETE") || !strings.Contains(rec.errors[1], "JQL it does not implement") {
		t.Errorf("the double did not fail the test: %q", rec.errors)
	}
}

// TestSearchAndCommentsPage: search/jql returns at most PageSize issues a
// page with a nextPageToken until isLast (it always said isLast: true, so
// no client's paging was ever exercised), and GET …/comment pages an
// issue's comments by startAt with their total (it was refused as
// unimplemented). A token of another query is refused.
func TestSearchAndCommentsPage(t *testing.T) {
	rec := &recorder{}
	s := Start(rec, Options{Project: "OPS", User: "u@example.com", Token: "tok", PageSize: 2, InlineComments: 1})
	defer s.Close()
	for n := 1; n <= 5; n++ {
		s.AddIssue(fmt.Sprintf("issue %d", n))
	}
	var keys []string
	token := ""
	for page := 0; page < 10; page++ {
		path := "/rest/api/2/search/jql?jql=project+%3D+OPS&fields=summary&maxResults=100"
		if token != "" {
			path += "&nextPageToken=" + token
		}
		code, body := call(t, s, "GET", path, "", true)
		issues, _ := body["issues"].([]any)
		if code != 200 || len(issues) > 2 {
			t.Fatalf("page %d: %d, %d issues: %v", page, code, len(issues), body)
		}
		for _, i := range issues {
			keys = append(keys, i.(map[string]any)["key"].(string))
		}
		next, hasNext := body["nextPageToken"].(string)
		if last := body["isLast"] == true; last == hasNext {
			t.Fatalf("page %d: isLast %v with nextPageToken %q", page, body["isLast"], next)
		}
		if !hasNext {
			break
		}
		token = next
	}
	if strings.Join(keys, ",") != "OPS-1,OPS-2,OPS-3,OPS-4,OPS-5" {
		t.Errorf("paged search found %v", keys)
	}
	if code, _ := call(t, s, "GET", "/rest/api/2/search/jql?jql=project+%3D+OTHER&nextPageToken="+token, "", true); code != 400 {
		t.Errorf("another query's token answered %d, want 400", code)
	}

	for _, c := range []string{"one", "two", "three"} {
		if code, _ := call(t, s, "POST", "/rest/api/2/issue/OPS-1/comment", `{"body":"`+c+`"}`, true); code != 201 {
			t.Fatalf("comment: %d", code)
		}
	}
	_, issue := call(t, s, "GET", "/rest/api/2/issue/OPS-1?fields=comment", "", true)
	inline := issue["fields"].(map[string]any)["comment"].(map[string]any)
	if inline["total"] != 3.0 || len(inline["comments"].([]any)) != 1 {
		t.Errorf("inline comments: %v", inline)
	}
	code, page := call(t, s, "GET", "/rest/api/2/issue/OPS-1/comment?startAt=1&maxResults=5", "", true)
	comments, _ := page["comments"].([]any)
	if code != 200 || page["total"] != 3.0 || page["startAt"] != 1.0 || page["maxResults"] != 2.0 || len(comments) != 2 || comments[1].(map[string]any)["body"] != "three" {
		t.Errorf("comments from 1: %d %v", code, page)
	}
	if code, _ := call(t, s, "GET", "/rest/api/2/issue/OPS-9/comment", "", true); code != 404 {
		t.Errorf("comments of a missing issue: %d", code)
	}
	if len(rec.errors) != 0 {
		t.Fatalf("documented calls were reported: %v", rec.errors)
	}
	if code, _ := call(t, s, "GET", "/rest/api/2/issue/OPS-1/comment?expand=renderedBody", "", true); code != 400 || len(rec.errors) != 1 {
		t.Errorf("an unimplemented parameter answered %d and reported %v", code, rec.errors)
	}
}
