package plugin

import (
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

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

// TestStatusTellsOnlyReviewersOfTheBacklog: closed sessions awaiting
// review are the reviewers' to hear of; on-call's status said so on every
// run, to people who could do nothing about it.
func TestStatusTellsOnlyReviewersOfTheBacklog(t *testing.T) {
	f := newFakeCluster(t)
	for _, args := range [][]string{
		{"breakglass", "web", "deployment/web", "--replicas", "3", "--reason", "load", "-y"},
		{"restore", "web", "--force", "--reason", "abandoned", "-y"},
	} {
		if code, out, errOut := runPlugin(t, args...); code != ExitOK {
			t.Fatalf("%v: exit %d: %s %s", args, code, out, errOut)
		}
	}
	if _, _, errOut := runPlugin(t, "status"); strings.Contains(errOut, "await review") {
		t.Errorf("on-call's status tells of the review backlog: %s", errOut)
	}
	f.kube.PrependReactor("create", "selfsubjectreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
			UserInfo: authenticationv1.UserInfo{Username: "rita", Groups: []string{audit.ReviewerGroup, "auditors"}}}}, nil
	})
	if _, _, errOut := runPlugin(t, "status"); !strings.Contains(errOut, "1 closed session(s) await review") {
		t.Errorf("a reviewer's status does not tell of the backlog: %s", errOut)
	}
}
