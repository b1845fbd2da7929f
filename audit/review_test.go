package audit

import (
	"strconv"
	"strings"
	"testing"
)

// TestReviewRules: the verdict that stands, over a restored session's
// whole review history. Only the reviewer role's reviews count; a
// rejection stands until an approval by another reviewer overturns it by
// name; every review that does not count is named.
func TestReviewRules(t *testing.T) {
	// review is "actor verdict [overturns-seq]"; actors in capitals are
	// not in the reviewer group; overturns "?" names no record.
	type want struct {
		verdict, by string
		breaks      string // "seq seq …" of the reviews that do not count
	}
	for name, tc := range map[string]struct {
		reviews []string
		want    want
	}{
		"none":                  {nil, want{"", "", ""}},
		"one approval":          {[]string{"rita approved"}, want{VerdictApproved, "rita", ""}},
		"one rejection":         {[]string{"rita rejected"}, want{VerdictRejected, "rita", ""}},
		"an on-call's approval": {[]string{"ONCALL approved"}, want{"", "", "10"}},
		"an on-call's approval over a rejection (the report of issue #32)": {[]string{"rita rejected", "ONCALL approved"}, want{VerdictRejected, "rita", "11"}},
		"an approval over a rejection, not overturning it":                 {[]string{"rita rejected", "rex approved"}, want{VerdictRejected, "rita", "11"}},
		"an approval overturning the rejection":                            {[]string{"rita rejected", "rex approved 10"}, want{VerdictApproved, "rex", ""}},
		"the rejecter overturning their own rejection":                     {[]string{"rita rejected", "rita approved 10"}, want{VerdictRejected, "rita", "11"}},
		"an overturn naming no rejection":                                  {[]string{"rita rejected", "rex approved ?"}, want{VerdictRejected, "rita", "11"}},
		"an overturn naming an approval":                                   {[]string{"rita approved", "rex rejected", "sam approved 10"}, want{VerdictRejected, "rex", "12"}},
		"an overturn with nothing to overturn":                             {[]string{"rita approved", "rex approved ?"}, want{VerdictApproved, "rita", "11"}},
		"a rejection that says it overturns":                               {[]string{"rita approved", "rex rejected 10"}, want{VerdictApproved, "rita", "11"}},
		"a rejection after an approval stands":                             {[]string{"rita approved", "rex rejected"}, want{VerdictRejected, "rex", ""}},
		"a second rejecter may not overturn":                               {[]string{"rita rejected", "rex rejected", "rita approved 11"}, want{VerdictRejected, "rex", "12"}},
		"a third reviewer overturns both":                                  {[]string{"rita rejected", "rex rejected", "sam approved 11"}, want{VerdictApproved, "sam", ""}},
		"an overturn of a rejection no longer standing":                    {[]string{"rita rejected", "rex approved 10", "sam rejected", "tom approved 10"}, want{VerdictRejected, "sam", "13"}},
		"two overturns racing: the second changes nothing":                 {[]string{"rita rejected", "rex approved 10", "sam approved 10"}, want{VerdictApproved, "sam", ""}},
		"the rejecter overturning after another did":                       {[]string{"rita rejected", "rex approved 10", "rita approved 10"}, want{VerdictApproved, "rex", "12"}},
		"an approval after an overturned rejection needs no overturn":      {[]string{"rita rejected", "rex approved 10", "sam approved"}, want{VerdictApproved, "sam", ""}},
	} {
		t.Run(name, func(t *testing.T) {
			ss := NewSessions()
			var breaks []string
			steps := []step{
				{EventPlanned, "s", "alice", "web", StatusStarted, ""},
				{EventPaused, "s", "alice", "web", "", ""},
				{EventPatched, "s", "alice", "web", "", ""},
				{EventRestored, "s", "carol", "web", "", ""},
			}
			var records []*Record
			for i, st := range steps {
				records = append(records, st.record(i+1))
			}
			for i, rv := range tc.reviews {
				seq := 10 + i
				f := strings.Fields(rv)
				r := step{EventReviewed, "s", strings.ToLower(f[0]), "web", "", ""}.record(seq)
				r.ID, r.Review.Verdict = "r"+strconv.Itoa(seq), f[1]
				if f[0] != strings.ToLower(f[0]) {
					r.Actor.Groups = []string{"oncall"}
				}
				if len(f) == 3 {
					r.Review.Overturns = "r" + f[2]
				}
				records = append(records, r)
			}
			for _, r := range records {
				if ok, b := ss.Add(r); b != nil {
					if b.Kind != BreakReviewOutOfRules || ok {
						t.Errorf("record %d: accepted %v, break %s; want review-out-of-rules", r.Seq, ok, b)
					}
					breaks = append(breaks, strconv.FormatUint(b.Seq, 10))
				}
			}
			h := &ss.Session("s").Reviews
			by := ""
			if r := h.Standing(); r != nil {
				by = r.Actor.Username
			}
			if got := (want{h.Verdict(), by, strings.Join(breaks, " ")}); got != tc.want {
				t.Errorf("verdict %q by %q, out of rules %q; want %q by %q, out of rules %q", got.verdict, got.by, got.breaks, tc.want.verdict, tc.want.by, tc.want.breaks)
			}
			if len(h.History) != len(tc.reviews) {
				t.Errorf("history of %d reviews, want %d", len(h.History), len(tc.reviews))
			}
			if unreviewed := len(ss.Unreviewed()) == 1; unreviewed == (tc.want.verdict == VerdictApproved) {
				t.Errorf("listed as unreviewed: %v with verdict %q", unreviewed, tc.want.verdict)
			}
		})
	}
}

// TestReviewOutOfRulesDetail: what verify says of an approval over a
// standing rejection, and of a review not by the reviewer role.
func TestReviewOutOfRulesDetail(t *testing.T) {
	var h Reviews
	rec := func(seq uint64, actor, verdict, overturns string, groups ...string) *Record {
		return &Record{Seq: seq, ID: "r" + strconv.FormatUint(seq, 10), Event: EventReviewed, Actor: Actor{Username: actor, Groups: groups},
			Review: &Review{Verdict: verdict, Note: "n", Overturns: overturns}}
	}
	if b := h.Add(rec(5, "rita", VerdictRejected, "", ReviewerGroup)); b != nil {
		t.Fatalf("a rejection: %s", b)
	}
	for _, tc := range []struct {
		r    *Record
		want string
	}{
		{rec(6, "oncall", VerdictApproved, "r5", "oncall", "system:authenticated"), "reviewed by oncall, who is not in group reviewers: only the reviewer role's reviews count"},
		{rec(7, "rex", VerdictApproved, "", ReviewerGroup), "approved by rex while the rejection by rita (record 5) stands: an approval over a rejection overturns it, saying why"},
		{rec(8, "rita", VerdictApproved, "r5", ReviewerGroup), "approved by rita, who rejected the session (record 5): a rejection is overturned by another reviewer"},
	} {
		if b := h.Add(tc.r); b == nil || b.Kind != BreakReviewOutOfRules || b.Seq != tc.r.Seq || b.Detail != tc.want {
			t.Errorf("record %d: %v; want review-out-of-rules: %s", tc.r.Seq, b, tc.want)
		}
	}
	if h.Verdict() != VerdictRejected || len(h.History) != 4 {
		t.Errorf("verdict %q over %d reviews; want rejected over 4", h.Verdict(), len(h.History))
	}
}

// TestVerifyIgnoresAReviewLabelledAsSomethingElse: the admission policy
// lets only the reviewer role create a record labelled
// breakglass.reviewed; an on-call's review labelled breakglass.patched
// got past it, so it is named relabelled and counts for nothing, though
// it claims the reviewer group.
func TestVerifyIgnoresAReviewLabelledAsSomethingElse(t *testing.T) {
	var records []*Record
	for i, st := range []step{
		{EventPlanned, "s", "alice", "web", StatusStarted, ""},
		{EventPaused, "s", "alice", "web", "", ""},
		{EventRestored, "s", "carol", "web", "", ""},
		{EventReviewed, "s", "mallory", "web", "", ""},
	} {
		records = append(records, st.record(i+1))
	}
	var entries []Entry
	prev := ""
	for _, r := range records {
		doc, err := seal(r, r.Seq, prev)
		if err != nil {
			t.Fatal(err)
		}
		prev = r.Hash
		labels := recordLabels(r)
		if r.Event == EventReviewed {
			labels[LabelEvent] = string(EventPatched)
		}
		entries = append(entries, Entry{Slot: r.Seq, Name: RecordName(r.Seq), Doc: doc, Actor: r.Actor.Username, Labels: labels})
	}
	rep := Verify(entries, &HeadState{Seq: 4, Hash: prev})
	if len(rep.Breaks) != 1 || rep.Breaks[0].Kind != BreakRelabelled || rep.Breaks[0].Seq != 4 {
		t.Errorf("breaks %v; want relabelled at 4 alone", rep.Breaks)
	}
	_, ss := Legal(Trusted(entries))
	if s := ss.Session("s"); len(s.Reviews.History) != 0 || len(ss.Unreviewed()) != 1 {
		t.Errorf("the relabelled review counts: %+v", s.Reviews)
	}
}
