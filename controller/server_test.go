package controller

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestReadyzFollowsTheLease: a standby replica is ready (it serves
// /metrics and waits for the lease); a leader is ready only once its cache
// has synced, so that a rollout never counts a leader that cannot act yet.
func TestReadyzFollowsTheLease(t *testing.T) {
	c := &Controller{Metrics: NewMetrics()}
	h := c.Handler()
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, strings.TrimSpace(rec.Body.String())
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusOK || body != "ok: standing by" {
		t.Errorf("/readyz of a standby: %d %q", code, body)
	}
	c.Metrics.setLeader(true)
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz of a leader whose cache has not synced: %d, want 503", code)
	}
	close(c.readyCh())
	if code, body := get("/readyz"); code != http.StatusOK || body != "ok: leading" {
		t.Errorf("/readyz of a synced leader: %d %q", code, body)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics: %d, no Go runtime metrics", code)
	}
}
