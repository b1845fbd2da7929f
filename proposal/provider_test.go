package proposal

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/test/gitdouble"
)

// TestProvidersAgainstTheirDoubles: each provider finds the request
// already open for its branch past the first page (Link rel="next" on
// GitHub, X-Next-Page on GitLab), opens one otherwise, reads its state,
// and names a refused token without sending it anywhere else.
func TestProvidersAgainstTheirDoubles(t *testing.T) {
	for _, kind := range []gitdouble.Kind{gitdouble.GitHub, gitdouble.GitLab} {
		t.Run(string(kind), func(t *testing.T) {
			double := gitdouble.Start(t, gitdouble.Options{Kind: kind, Project: "acme/web", Token: "t0ken", PageSize: 2})
			defer double.Close()
			open := "open"
			if kind == gitdouble.GitLab {
				open = "opened"
			}
			for i := range 5 {
				double.Add(gitdouble.Change{Title: "other", Head: fmt.Sprintf("feature-%d", i), Base: "main", State: open})
			}
			existing := double.Add(gitdouble.Change{Title: "mine", Head: "kubectl-gitops/s1", Base: "main", State: open})
			provider := func(token string) Provider {
				var p Provider
				var err error
				if kind == gitdouble.GitHub {
					p, err = NewGitHub(double.API(), "acme/web", token)
				} else {
					p, err = NewGitLab(double.API(), "acme/web", token)
				}
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			p := provider("t0ken")
			ctx := context.Background()
			got, err := p.Open(ctx, Request{Branch: "kubectl-gitops/s1", Base: "main", Title: "t", Body: "b"})
			if err != nil || got.Number != existing || got.State != StateOpen {
				t.Fatalf("Open of a branch with a request on the last page: %+v %v; want #%d", got, err, existing)
			}
			created, err := p.Open(ctx, Request{Branch: "kubectl-gitops/s2", Base: "main", Title: "fix", Body: "why"})
			if err != nil || created.Number != existing+1 || !strings.Contains(created.URL, fmt.Sprint(created.Number)) {
				t.Fatalf("Open of a new branch: %+v %v", created, err)
			}
			if c := double.Changes()[created.Number-1]; c.Head != "kubectl-gitops/s2" || c.Base != "main" || c.Body != "why" {
				t.Errorf("the double holds %+v", c)
			}
			double.Merge(created.Number)
			if state, err := p.State(ctx, created.Number); err != nil || state != StateMerged {
				t.Errorf("state after merge: %q %v", state, err)
			}
			// Read whole, a request says which branch it merges.
			if got, err := p.(Getter).Get(ctx, created.Number); err != nil || got.Branch != "kubectl-gitops/s2" || got.State != StateMerged {
				t.Errorf("Get: %+v %v", got, err)
			}
			_, err = provider("wrong").Open(ctx, Request{Branch: "x", Base: "main", Title: "t"})
			if !errors.Is(err, ErrProvider) || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "wrong") {
				t.Errorf("a refused token: %v", err)
			}
		})
	}
}

func TestDetect(t *testing.T) {
	for url, want := range map[string]string{
		"https://github.com/acme/web.git":  "github acme/web",
		"git@github.com:acme/web.git":      "github acme/web",
		"https://gitlab.com/acme/sub/web":  "gitlab acme/sub/web",
		"https://git.example/acme/web.git": " acme/web",
		"file:///tmp/repo":                 " ",
	} {
		p, project := Detect(url)
		if got := p + " " + project; got != want {
			t.Errorf("Detect(%s) = %q, want %q", url, got, want)
		}
	}
}

// TestTheTokenStaysOnTheAPIsHost: neither a redirect nor a next-page link
// takes the token to another host (Go drops Authorization on a redirect
// elsewhere, but not GitLab's PRIVATE-TOKEN).
func TestTheTokenStaysOnTheAPIsHost(t *testing.T) {
	var leaked []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked = append(leaked, r.Header.Get("PRIVATE-TOKEN")+r.Header.Get("Authorization"))
		w.Write([]byte(`[]`))
	}))
	defer elsewhere.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "merge_requests/1") {
			http.Redirect(w, r, elsewhere.URL+"/steal", http.StatusFound)
			return
		}
		w.Header().Set("Link", `<`+elsewhere.URL+`/repos/acme/web/pulls?page=2>; rel="next"`)
		w.Write([]byte(`[]`))
	}))
	defer api.Close()
	gitlab, _ := NewGitLab(api.URL, "acme/web", "s3cret")
	if _, err := gitlab.State(context.Background(), 1); err == nil {
		t.Error("a redirect to another host: no error")
	}
	github, _ := NewGitHub(api.URL, "acme/web", "s3cret")
	if _, err := github.Open(context.Background(), Request{Branch: "b", Base: "main", Title: "t"}); err == nil || !strings.Contains(err.Error(), "another host") {
		t.Errorf("a next page on another host: %v", err)
	}
	if len(leaked) > 0 {
		t.Errorf("the other host was asked, with %q", leaked)
	}
}
