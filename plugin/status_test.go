package plugin

import (
	"strings"
	"testing"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// TestDescribeMirror: status says what the controller published of its
// mirror, and, when that is older than a running leader leaves it, that
// no controller has published since: a stopped controller's last word is
// not shown as the present.
func TestDescribeMirror(t *testing.T) {
	now := time.Now()
	oldest := now.Add(-3 * time.Minute)
	for _, tc := range []struct {
		name string
		st   audit.MirrorState
		want []string
		not  []string
	}{
		{"caught up, fresh", audit.MirrorState{Mirror: "s3://b/p", WriteOnce: true, Newest: 42, Leader: "pod-a", Published: now.Add(-5 * time.Second)},
			[]string{"mirror s3://b/p: caught up at record 42", "published by pod-a 5s ago"}, []string{"is one running", "NOT write-once", "pruned"}},
		{"a backlog, unlocked, pruned", audit.MirrorState{Mirror: "s3://b/p", Newest: 40, Backlog: 2, OldestUnmirrored: &oldest, PrunedThrough: 30, Leader: "pod-a", Published: now},
			[]string{"2 record(s) not yet mirrored after record 40, the oldest waiting 3m", "NOT write-once", "records up to 30 pruned from the cluster"}, nil},
		{"stale: the controller stopped", audit.MirrorState{Mirror: "s3://b/p", WriteOnce: true, Newest: 42, Leader: "pod-a", Published: now.Add(-15 * time.Minute)},
			[]string{"as pod-a last published it 15m ago: no controller has published since, is one running?"}, []string{"published by"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := describeMirror(&tc.st, now)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("%q says %q", got, n)
				}
			}
		})
	}
}
