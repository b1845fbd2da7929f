package env

import (
	"context"
	"testing"
	"time"
)

// StartT starts an environment for a test, stopping it when the test ends
// and printing every component's log tail if the test failed.
func StartT(t testing.TB, opts Options) *Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("starting the test environment: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("test environment logs (%s):\n%s", e.Dir, e.LogTails(60))
		}
		e.Stop()
	})
	return e
}
