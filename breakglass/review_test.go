package breakglass

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// TestReviewFollowsTheRules: the engine refuses, before writing anything,
// what the rules of review do not count: a review by someone outside the
// reviewer role (issue #32: a second on-call approved a rejected
// session), an approval over a standing rejection that does not overturn
// it, a rejecter overturning their own rejection, an overturn with nothing
// to overturn. An overturn names the rejection; the session awaits review
// until an approval stands.
func TestReviewFollowsTheRules(t *testing.T) {
	ctx := context.Background()
	store := &audit.FileStore{Path: filepath.Join(t.TempDir(), "audit.jsonl")}
	web := &audit.AppRef{Namespace: "argocd", Name: "web"}
	for _, r := range []*audit.Record{
		{Event: audit.EventPlanned, Session: "s", Actor: audit.Actor{Username: "alice", Groups: []string{"oncall", audit.ReviewerGroup}}, Application: web, Outcome: audit.Outcome{Status: audit.StatusStarted}},
		{Event: audit.EventPaused, Session: "s", Actor: audit.Actor{Username: "alice"}, Application: web, Outcome: audit.Outcome{Status: audit.StatusSucceeded}},
		{Event: audit.EventRestored, Session: "s", Actor: audit.Actor{Username: "carol"}, Application: web, Outcome: audit.Outcome{Status: audit.StatusSucceeded}},
	} {
		if err := store.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	as := func(user string, groups ...string) *Engine {
		kube := kubefake.NewSimpleClientset()
		kube.PrependReactor("create", "selfsubjectreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
				UserInfo: authenticationv1.UserInfo{Username: user, Groups: groups}}}, nil
		})
		return &Engine{Client: argocd.Client{Kube: kube, AppNamespace: "argocd"}, Audit: store}
	}
	approve := ReviewRequest{Session: "s", Approve: true, Note: "right call"}
	overturn := ReviewRequest{Session: "s", Approve: true, Overturn: true, Note: "the ticket shows the scale-up was tried first"}
	reject := ReviewRequest{Session: "s", Reject: true, Note: "should have scaled first"}
	var rejection *audit.Record
	for _, step := range []struct {
		name     string
		engine   *Engine
		req      ReviewRequest
		err      error
		awaiting bool
	}{
		{"an on-call's approval", as("oscar", "oncall", "system:authenticated"), approve, ErrNotReviewer, true},
		{"the opener's, in the reviewer group too", as("alice", "oncall", audit.ReviewerGroup), approve, ErrSelfReview, true},
		{"an overturn with no rejection", as("rex", audit.ReviewerGroup), overturn, argocd.ErrInvalidInput, true},
		{"a reviewer's rejection", as("rita", audit.ReviewerGroup), reject, nil, true},
		{"an approval not overturning it", as("rex", audit.ReviewerGroup), approve, ErrRejectionStands, true},
		{"the rejecter overturning it", as("rita", audit.ReviewerGroup), overturn, ErrOwnRejection, true},
		{"another reviewer overturning it", as("rex", audit.ReviewerGroup), overturn, nil, false},
		{"an overturn once it is overturned", as("sam", audit.ReviewerGroup), overturn, argocd.ErrInvalidInput, false},
	} {
		before, err := store.Entries(ctx, audit.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		rec, _, err := step.engine.Review(ctx, step.req)
		switch {
		case step.err == nil && err != nil:
			t.Fatalf("%s: %v", step.name, err)
		case step.err != nil && !errors.Is(err, step.err):
			t.Errorf("%s: %v; want %v", step.name, err, step.err)
		}
		after, _ := store.Entries(ctx, audit.Filter{})
		if written := len(after) - len(before); (step.err == nil) != (written == 1) {
			t.Errorf("%s: %d records written", step.name, written)
		}
		if step.err == nil && step.req.Reject {
			rejection = rec
		}
		if step.err == nil && step.req.Overturn && (rec.Review.Overturns == "" || rec.Review.Overturns != rejection.ID) {
			t.Errorf("%s: overturns %q; want the rejection %q", step.name, rec.Review.Overturns, rejection.ID)
		}
		waiting, err := step.engine.AwaitingReview(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(waiting) == 1; got != step.awaiting {
			t.Errorf("after %s: awaiting review %v, want %v", step.name, got, step.awaiting)
		}
	}
	entries, _ := store.Entries(ctx, audit.Filter{})
	if rep := audit.Verify(entries, nil); !rep.Intact() {
		t.Errorf("the reviews the engine wrote break the rules: %v", rep.Breaks)
	}
}
