//go:build e2e

package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestOncallArgoCDAccountIsReadOnly: the Argo CD token every test and the
// demo give the on-call shell is a read-only account's, as README's install
// gives on-call: it reads Applications (the field-level check) and may not
// sync, edit or delete them.
func TestOncallArgoCDAccountIsReadOnly(t *testing.T) {
	core(t)
	e := environment(t)
	deployApp(t, "ac-readonly")
	ctx := context.Background()
	token, err := e.ArgoToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, path, body string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, method, "http://"+e.ArgoServerAddr+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := call(http.MethodGet, "/api/v1/applications/ac-readonly/manifests", ""); code != http.StatusOK {
		t.Errorf("on-call may not read the manifests the field-level check needs: %d %s", code, body)
	}
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "/api/v1/applications/ac-readonly/sync", `{}`},
		{http.MethodDelete, "/api/v1/applications/ac-readonly", ""},
	} {
		if code, body := call(c.method, c.path, c.body); code == http.StatusOK {
			t.Errorf("on-call's Argo CD account may %s %s: %s", c.method, c.path, body)
		}
	}
}
