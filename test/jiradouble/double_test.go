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
