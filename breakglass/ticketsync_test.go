package breakglass

import (
	"strings"
	"testing"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

func TestPendingTickets(t *testing.T) {
	app := &audit.AppRef{Namespace: "argocd", Name: "web"}
	rec := func(event audit.Event, status, key string) *audit.Record {
		r := &audit.Record{Event: event, Session: "s1", Application: app, Outcome: audit.Outcome{Status: status, Error: string(event) + " " + status}}
		if key != "" {
			r.Ticket = &audit.Ticket{Key: key}
		}
		return r
	}
	planned := rec(audit.EventPlanned, audit.StatusStarted, "")
	patched := rec(audit.EventPatched, audit.StatusSucceeded, "")
	attempt := rec(audit.EventTicketed, audit.StatusStarted, "")
	ticketed := rec(audit.EventTicketed, audit.StatusSucceeded, "OPS-1")
	queued := rec(audit.EventQueued, audit.StatusQueued, "")
	queuedKey := rec(audit.EventQueued, audit.StatusQueued, "OPS-1")
	failed := rec(audit.EventFailed, audit.StatusFailed, "")
	restored := rec(audit.EventRestored, audit.StatusSucceeded, "")
	restoreStarted := rec(audit.EventRestored, audit.StatusStarted, "")
	claim := rec(audit.EventFiled, audit.StatusStarted, "")
	skipped := rec(audit.EventFiled, audit.StatusSkipped, "")
	filed := rec(audit.EventFiled, audit.StatusSucceeded, "OPS-1")

	tests := []struct {
		name    string
		records []*audit.Record
		// want is "" for nothing pending, else "KEY content|close-only
		// closed|open".
		want string
	}{
		{"filed at break-glass", []*audit.Record{planned, patched, attempt, ticketed}, ""},
		{"queued at break-glass", []*audit.Record{planned, patched, attempt, queued}, " content open"},
		{"refused by Jira", []*audit.Record{planned, patched, attempt, failed}, " content open"},
		{"queued then restored", []*audit.Record{planned, patched, queued, restoreStarted, restored}, " content closed"},
		{"filed, close queued at restore", []*audit.Record{planned, patched, ticketed, restoreStarted, restored, queuedKey}, "OPS-1 close-only closed"},
		{"a --ticket comment queued", []*audit.Record{planned, patched, queuedKey}, "OPS-1 content open"},
		{"a skipped claim leaves it pending", []*audit.Record{planned, patched, queued, claim, skipped}, " content open"},
		{"synced", []*audit.Record{planned, patched, queued, claim, filed}, ""},
		{"queued again after a sync", []*audit.Record{planned, patched, queued, claim, filed, restored, queuedKey}, "OPS-1 close-only closed"},
		{"interrupted before the patch", []*audit.Record{planned, queued}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, r := range tt.records {
				// Shared records: number them for this chain.
				c := *r
				c.Seq = uint64(i + 1)
				tt.records[i] = &c
			}
			pending := PendingTickets(tt.records)
			got := ""
			if len(pending) > 1 {
				t.Fatalf("%d pending for one session", len(pending))
			}
			if len(pending) == 1 {
				p := pending[0]
				content, closed := "close-only", "open"
				if p.NeedsContent {
					content = "content"
				}
				if p.Closed != nil {
					closed = "closed"
				}
				got = strings.Join([]string{p.Key, content, closed}, " ")
				if p.App != *app || len(p.Patches) != 1 || p.Why == "" {
					t.Errorf("pending %+v lacks its application, patches or reason", p)
				}
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestClaimsDatedInTheFutureDoNotHold: a claim's time is its writer's, so
// one dated ahead of the claimant's own would have held for good.
func TestClaimsDatedInTheFutureDoNotHold(t *testing.T) {
	now := time.Now()
	for name, tc := range map[string]struct {
		claimed time.Time
		want    bool
	}{
		"just now":       {now.Add(-time.Second), true},
		"stale":          {now.Add(-claimStale - time.Second), false},
		"in the future":  {now.Add(time.Hour), false},
		"a clock's skew": {now.Add(30 * time.Second), true},
	} {
		if got := live(tc.claimed, now); got != tc.want {
			t.Errorf("%s: live %v, want %v", name, got, tc.want)
		}
	}
}
