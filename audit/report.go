package audit

import (
	"encoding/json"
	"sort"
	"strings"
	"time"
)

// EmergencyChange is one break-glass session as an auditor files it: who
// changed what, why, when the fix went live, how the session ended, who
// reviewed it afterwards.
type EmergencyChange struct {
	Session     string   `json:"session"`
	Application AppRef   `json:"application"`
	Targets     []string `json:"targets"`
	Opener      string   `json:"opener"`
	Joiners     []string `json:"joiners,omitempty"`
	Reason      string   `json:"reason"`
	Incident    string   `json:"incident,omitempty"`
	// Changes are the changed fields as the records keep them.
	Changes []string   `json:"changes"`
	Opened  time.Time  `json:"opened"`
	FixLive *time.Time `json:"fixLive,omitempty"`
	// End is restored, forced, aborted, or open.
	End      string     `json:"end"`
	ClosedAt *time.Time `json:"closedAt,omitempty"`
	// TimeToRestore is from opening to the close, for restored and forced.
	TimeToRestore string `json:"timeToRestore,omitempty"`
	GitRevision   string `json:"gitRevision,omitempty"`
	Ticket        string `json:"ticket,omitempty"`
	// Reviewer, Verdict and ReviewNote are the review whose verdict stands
	// by the rules of review (docs/design.md §8); Reviews is every review.
	Reviewer   string `json:"reviewer,omitempty"`
	Verdict    string `json:"verdict,omitempty"`
	ReviewNote string `json:"reviewNote,omitempty"`
	// ReviewDelay is from the close to the first review that counts.
	ReviewDelay string        `json:"reviewDelay,omitempty"`
	Reviews     []ReviewEvent `json:"reviews"`
	reviewed    time.Duration
	restore     time.Duration
}

// ReviewEvent is one review in a session's history: who, when, the
// verdict and note, the rejection it overturns, and whether it counts.
type ReviewEvent struct {
	Seq      uint64    `json:"seq"`
	Time     time.Time `json:"time"`
	Reviewer string    `json:"reviewer"`
	Verdict  string    `json:"verdict"`
	Note     string    `json:"note"`
	// Overturns is the sequence number of the rejection an approval
	// overturns (0: none, or one the session does not hold).
	Overturns uint64 `json:"overturns,omitempty"`
	// Counts says whether the review follows the rules of review; Finding
	// is why not, as audit verify names it.
	Counts  bool   `json:"counts"`
	Finding string `json:"finding,omitempty"`
}

// Summary is the report's figures.
type Summary struct {
	Changes             int            `json:"changes"`
	PerApplication      map[string]int `json:"perApplication"`
	PerMonth            map[string]int `json:"perMonth"`
	MedianTimeToRestore string         `json:"medianTimeToRestore,omitempty"`
	Forced              int            `json:"forced"`
	ShareForced         float64        `json:"shareForced"`
	ReviewedWithin48h   int            `json:"reviewedWithin48h"`
	ShareReviewedIn48h  float64        `json:"shareReviewedWithin48h"`
	Unreviewed          int            `json:"unreviewed"`
}

// ReviewWindow is how soon after its close a review counts as timely.
const ReviewWindow = 48 * time.Hour

// EmergencyChanges reads the sessions opened since since (zero: all) out
// of records (verified, in chain order), through the session state
// machine: only the records it accepts count.
func EmergencyChanges(records []*Record, since time.Time) ([]EmergencyChange, Summary) {
	legal, ss := Legal(records)
	byID := map[string]*EmergencyChange{}
	var order []string
	for _, r := range legal {
		s := ss.Session(r.Session)
		if s == nil || s.Opened == nil {
			continue
		}
		c := byID[r.Session]
		if c == nil {
			if s.Opened.Time.Before(since) {
				continue
			}
			c = &EmergencyChange{Session: s.ID, Application: s.Application, Opener: s.Opener, Reason: s.Opened.Reason,
				Incident: s.Opened.Incident, Opened: s.Opened.Time.UTC(), End: "open", Changes: []string{}, Targets: []string{}}
			byID[r.Session] = c
			order = append(order, r.Session)
		}
		ok := r.Outcome.Status == StatusSucceeded
		switch r.Event {
		case EventPlanned:
			if r.Actor.Username != c.Opener && !contains(c.Joiners, r.Actor.Username) {
				c.Joiners = append(c.Joiners, r.Actor.Username)
			}
		case EventPatched:
			if !ok {
				break
			}
			if c.FixLive == nil {
				at := r.Time.UTC()
				c.FixLive = &at
			}
			if r.Target != nil && !contains(c.Targets, r.Target.String()) {
				c.Targets = append(c.Targets, r.Target.String())
			}
			for _, ch := range r.Changes {
				c.Changes = append(c.Changes, ch.Path+": "+valueText(ch.Before)+" → "+valueText(ch.After))
			}
		case EventAborted:
			if s.Closed == r {
				at := r.Time.UTC()
				c.End, c.ClosedAt = "aborted", &at
			}
		case EventRestored, EventForced:
			if !ok {
				break
			}
			at := r.Time.UTC()
			c.End, c.ClosedAt = strings.TrimPrefix(string(r.Event), "breakglass."), &at
			c.restore = at.Sub(c.Opened)
			c.TimeToRestore = roundDuration(c.restore)
			if r.Git != nil {
				c.GitRevision = r.Git.Revision
			}
		}
		if c.Ticket == "" && r.Ticket != nil && r.Ticket.Key != "" && s.Tickets[r.Ticket.Key] {
			c.Ticket = r.Ticket.Key
		}
	}
	out := make([]EmergencyChange, 0, len(order))
	sum := Summary{PerApplication: map[string]int{}, PerMonth: map[string]int{}}
	var restores []time.Duration
	for _, id := range order {
		c := byID[id]
		c.review(&ss.Session(id).Reviews)
		out = append(out, *c)
		sum.Changes++
		sum.PerApplication[c.Application.Namespace+"/"+c.Application.Name]++
		sum.PerMonth[c.Opened.Format("2006-01")]++
		switch c.End {
		case "forced":
			sum.Forced++
			restores = append(restores, c.restore)
		case "restored":
			restores = append(restores, c.restore)
		}
		if c.ReviewDelay != "" && c.reviewed <= ReviewWindow {
			sum.ReviewedWithin48h++
		}
		if c.ClosedAt != nil && c.End != "aborted" && c.Verdict != VerdictApproved {
			sum.Unreviewed++
		}
	}
	if len(restores) > 0 {
		sort.Slice(restores, func(i, j int) bool { return restores[i] < restores[j] })
		median := restores[len(restores)/2]
		if len(restores)%2 == 0 {
			median = (restores[len(restores)/2-1] + restores[len(restores)/2]) / 2
		}
		sum.MedianTimeToRestore = roundDuration(median)
	}
	if closed := len(restores); closed > 0 {
		sum.ShareForced = share(sum.Forced, closed)
		sum.ShareReviewedIn48h = share(sum.ReviewedWithin48h, closed)
	}
	return out, sum
}

// review takes the session's review history: every review, and the one
// that stands.
func (c *EmergencyChange) review(h *Reviews) {
	seqOf := map[string]uint64{}
	c.Reviews = []ReviewEvent{}
	for _, e := range h.History {
		r := e.Record
		seqOf[r.ID] = r.Seq
		ev := ReviewEvent{Seq: r.Seq, Time: r.Time.UTC(), Reviewer: r.Actor.Username, Counts: e.Break == nil}
		if r.Review != nil {
			ev.Verdict, ev.Note = r.Review.Verdict, r.Review.Note
			if r.Review.Overturns != "" {
				ev.Overturns = seqOf[r.Review.Overturns]
			}
		}
		if e.Break != nil {
			ev.Finding = string(e.Break.Kind) + ": " + e.Break.Detail
		}
		if ev.Counts && c.ReviewDelay == "" && c.ClosedAt != nil {
			c.reviewed = r.Time.Sub(*c.ClosedAt)
			c.ReviewDelay = roundDuration(c.reviewed)
		}
		c.Reviews = append(c.Reviews, ev)
	}
	if r := h.Standing(); r != nil {
		c.Reviewer, c.Verdict, c.ReviewNote = r.Actor.Username, r.Review.Verdict, r.Review.Note
	}
}

// Unreviewed are the sessions restored or forced that no approval stands
// for (never reviewed, or rejected and not overturned), oldest first.
func (ss *Sessions) Unreviewed() []*SessionLog {
	var out []*SessionLog
	for _, s := range ss.byID {
		if s.Closed != nil && s.Closed.Event != EventAborted && !s.Reviews.Approved() {
			out = append(out, s)
		}
	}
	for id, c := range ss.closed { // a lean check's
		if c.event != EventAborted && (c.reviews == nil || !c.reviews.Approved()) {
			out = append(out, c.expand(id))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Closed.Seq < out[j].Closed.Seq })
	return out
}

func share(n, of int) float64 { return float64(int(float64(n)/float64(of)*1000+0.5)) / 1000 }

// roundDuration is d to the minute, or to the second under a minute.
func roundDuration(d time.Duration) string {
	if d >= time.Minute {
		return d.Round(time.Minute).String()
	}
	return d.Round(time.Second).String()
}

func valueText(v any) string {
	switch t := v.(type) {
	case nil:
		return "(none)"
	case string:
		return t
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
