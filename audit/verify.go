package audit

import (
	"fmt"
	"sort"
	"time"
)

// Entry is a stored record as Verify sees it: its Slot (the sequence number
// its storage position promises: the ConfigMap name, or the JSONL line), the
// Name of that position, and the stored document. Slot 0 means the position
// is not one the tool writes.
type Entry struct {
	Slot uint64
	Name string
	Doc  []byte
	// Actor is the user name the API server let the creator stamp on the
	// record (the kubectl-gitops.io/actor annotation); "" when the store
	// has none (a file, or a record older than the stamp).
	Actor string
	// Unlabelled is a record ConfigMap found by its name alone: its record
	// label was removed, which hides it from label-selected listings.
	Unlabelled bool
	// Mutable is a record ConfigMap not marked immutable: it can be edited
	// in place. Labels are its labels, which must agree with its content.
	Mutable bool
	Labels  map[string]string
	// Created is when the API server created the record ConfigMap (zero
	// elsewhere).
	Created time.Time
	// RestoredBy is the cluster admin who wrote the record back from the
	// mirror (audit restore-log); "" for a record its actor wrote.
	RestoredBy string
}

// HeadState is the chain head: the sequence number and hash of the newest
// record, kept apart from the records so that truncating the log shows.
type HeadState struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

// BreakKind names a way the chain can be broken.
type BreakKind string

// The kinds of break Verify reports.
const (
	BreakMissing    BreakKind = "missing"
	BreakAltered    BreakKind = "altered"
	BreakReordered  BreakKind = "reordered"
	BreakInserted   BreakKind = "inserted"
	BreakForged     BreakKind = "forged"
	BreakUnlabelled BreakKind = "unlabelled"
	BreakWitness    BreakKind = "witness-mismatch"
	BreakMutable    BreakKind = "mutable"
	BreakRelabelled BreakKind = "relabelled"
)

// The findings Verify reports about the head, as warnings: the head is a
// pointer beside the chain, not part of it. Writers never believe a wrong
// one (they find the log's end themselves) and it hides no record, so a
// wrong head is named but does not make an intact log fail. Nor can it
// prove the newest records were deleted: whoever may delete records (no
// member of the groups the admission policy guards) may also move the head
// back; Jira witnesses and exports catch that.
const (
	// BreakHeadAhead is a head naming a record past the log's end.
	BreakHeadAhead BreakKind = "head-ahead"
	// BreakHeadBehind is a head naming a record before the log's end.
	BreakHeadBehind BreakKind = "head-behind"
	// BreakHeadMismatch is a head naming the log's end with another hash,
	// and a record whose writer found the head wrong (HeadFound) since
	// the last audit.head-repaired record.
	BreakHeadMismatch BreakKind = "head-mismatch"
	// BreakHeadMissing is a log of records with no head.
	BreakHeadMissing BreakKind = "head-missing"
)

// Witness is a record's sequence number and hash kept outside the cluster
// (on a Jira ticket, named by Where).
type Witness struct {
	Where string
	HeadState
}

// CheckWitnesses reports every witnessed record the chain no longer holds
// as witnessed: rewriting the whole log consistently shows here, to anyone
// who cannot also rewrite the witnesses.
func CheckWitnesses(entries []Entry, witnesses []Witness) []Break {
	hashes := map[uint64]string{}
	for _, e := range entries {
		if r, err := Parse(e.Doc); err == nil && e.Slot != 0 {
			hashes[e.Slot] = r.Hash
		}
	}
	var out []Break
	for _, w := range witnesses {
		switch got, ok := hashes[w.Seq]; {
		case !ok:
			out = append(out, Break{Kind: BreakWitness, Seq: w.Seq, Detail: fmt.Sprintf("%s witnessed record %d with hash %s; the log has no record %d", w.Where, w.Seq, short(w.Hash), w.Seq)})
		case got != w.Hash:
			out = append(out, Break{Kind: BreakWitness, Seq: w.Seq, Detail: fmt.Sprintf("%s witnessed record %d with hash %s; the log's record %d has %s (the log was rewritten)", w.Where, w.Seq, short(w.Hash), w.Seq, short(got))})
		}
	}
	return out
}

// Break is one place where the chain is not what the tool wrote.
type Break struct {
	Kind   BreakKind `json:"kind"`
	Seq    uint64    `json:"seq,omitempty"`
	Name   string    `json:"name,omitempty"`
	Detail string    `json:"detail"`
	// Fix is what puts it right, when something does; set by the caller
	// that knows how it is spelt (the command line).
	Fix string `json:"fix,omitempty"`
}

func (b Break) String() string {
	where := b.Name
	if where == "" {
		where = fmt.Sprintf("record %d", b.Seq)
	}
	if b.Fix != "" {
		return fmt.Sprintf("%s: %s: %s (fix: %s)", b.Kind, where, b.Detail, b.Fix)
	}
	return fmt.Sprintf("%s: %s: %s", b.Kind, where, b.Detail)
}

// Report is the result of Verify.
type Report struct {
	Records int        `json:"records"`
	Head    *HeadState `json:"head,omitempty"`
	Tip     HeadState  `json:"tip"`
	Breaks  []Break    `json:"breaks"`
	// Warnings are the findings about the head: named, never a break.
	Warnings []Break `json:"warnings"`
	// Witnesses is how many witnesses kept outside the cluster were
	// checked (audit verify --jira).
	Witnesses int `json:"witnesses,omitempty"`
	// Mirror is what was read of the mirror (audit verify --mirror).
	Mirror *MirrorSummary `json:"mirror,omitempty"`
	// Pruned is the cut a pruned log starts after (nil: not pruned).
	Pruned *Pruned `json:"pruned,omitempty"`
}

// Intact reports whether Verify found the chain unbroken; Warnings may
// still name the head.
func (r Report) Intact() bool { return len(r.Breaks) == 0 }

// Verify checks a chain: every record's hash matches its content, sits at
// the position its sequence number names, links to the record before it, and
// the head names the last record. head is nil for stores without one (a JSONL
// file, whose last line is its head).
func Verify(entries []Entry, head *HeadState) Report { return verifyFrom(entries, head, nil) }

// verifyFrom is Verify of a log pruned to cut (nil: not pruned).
func verifyFrom(entries []Entry, head *HeadState, cut *Cut) Report {
	sorted := append([]Entry(nil), entries...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Slot < sorted[j].Slot })
	v := NewVerifier()
	v.From(cut)
	for _, e := range sorted {
		v.Add(e)
	}
	return v.Report(head)
}

// A Verifier checks a chain one entry at a time, as Verify does, holding
// only what the next entry is checked against: a log of any length is
// verified in the memory of one page.
type Verifier struct {
	rep Report
	// foreign are the breaks at positions the tool never writes, reported
	// first, wherever the listing put them.
	foreign   []Break
	expect    uint64
	prevHash  string
	prevKnown bool
	last      uint64
	unordered bool
	sessions  *Sessions
	// cut is where a pruned log starts (nil: at record 1); cutChecked
	// whether a record tied the chain to it (the first kept record's
	// link, or record cut.Seq's hash).
	cut        *Cut
	cutChecked bool
	// beforeCut are the sessions found begun before the cut, each told
	// once.
	beforeCut map[string]bool
	// noted are the heads records found wrong since the last repair,
	// each head once.
	noted []notedHead
}

// notedHead is a wrong head as records noted it: the first and last
// record that did, and how many.
type notedHead struct {
	head        HeadState
	first, last uint64
	records     int
}

func (n notedHead) warning() Break {
	detail := fmt.Sprintf("when record %d was written the head named record %d with hash %s, which the log does not hold: the head was moved by hand, and record %d links to the true tip",
		n.first, n.head.Seq, short(n.head.Hash), n.first)
	if n.records > 1 {
		detail = fmt.Sprintf("when records %d to %d were written (%d of them noted it) the head named record %d with hash %s, which the log does not hold: the head was moved by hand, and each record links to the true tip",
			n.first, n.last, n.records, n.head.Seq, short(n.head.Hash))
	}
	return Break{Kind: BreakHeadMismatch, Name: "head", Seq: n.first, Detail: detail}
}

// note adds that record seq found head wrong.
func (v *Verifier) note(seq uint64, head HeadState) {
	for i := range v.noted {
		if n := &v.noted[i]; n.head == head {
			n.last, n.records = seq, n.records+1
			return
		}
	}
	v.noted = append(v.noted, notedHead{head: head, first: seq, last: seq, records: 1})
}

// NewVerifier starts checking a chain from record 1.
func NewVerifier() *Verifier {
	return &Verifier{rep: Report{Breaks: []Break{}, Warnings: []Break{}}, expect: 1, prevKnown: true, sessions: newLeanSessions()}
}

// From has the chain start after cut, the checkpoint a pruned log was
// pruned to: the records it covers may be absent, the first record kept
// must link to its hash (or, after a prune interrupted midway, the chain
// must reach record cut.Seq with it). Call it before the first Add. A
// cut whose signature was not verified is named cut-unverified.
func (v *Verifier) From(cut *Cut) { v.cut = cut }

// Ordered says whether every entry came in ascending position order, as Add
// needs; when not, the report means nothing and the entries must be sorted
// (Verify) instead.
func (v *Verifier) Ordered() bool { return !v.unordered }

// Add checks the next entry of the chain.
func (v *Verifier) Add(e Entry) {
	add := func(kind BreakKind, e Entry, format string, args ...any) {
		v.rep.Breaks = append(v.rep.Breaks, Break{Kind: kind, Seq: e.Slot, Name: e.Name, Detail: fmt.Sprintf(format, args...)})
	}
	if e.Slot == 0 {
		v.foreign = append(v.foreign, Break{Kind: BreakInserted, Name: e.Name, Detail: "not a position the tool writes records to"})
		return
	}
	if e.Slot <= v.last {
		v.unordered = true
	}
	v.last = e.Slot
	v.rep.Records++
	if e.Unlabelled {
		add(BreakUnlabelled, e, "its %s=record label was removed, hiding it from label-selected listings", LabelKind)
	}
	if c := v.cut; c != nil && v.expect == 1 && e.Slot > 1 {
		// The first record of a pruned log: positions up to the cut
		// are accounted for by its checkpoint.
		switch {
		case e.Slot-1 == c.Seq:
			v.prevHash, v.cutChecked = c.Hash, true
		case e.Slot <= c.Seq:
			v.prevKnown = false // a prune interrupted midway: record c.Seq ties the chain
		default:
			// Records after the cut are missing: named below.
			v.expect, v.cutChecked = c.Seq+1, true
		}
		if v.expect == 1 {
			v.expect = e.Slot
		}
	}
	if e.Slot > v.expect {
		missing := Entry{Slot: v.expect}
		if e.Slot-v.expect == 1 {
			add(BreakMissing, missing, "deleted: record %d is absent, record %d follows record %d", v.expect, e.Slot, v.expect-1)
		} else {
			add(BreakMissing, missing, "deleted: records %d to %d are absent", v.expect, e.Slot-1)
		}
		v.prevKnown = false
	}
	v.expect = e.Slot + 1
	rec, err := Parse(e.Doc)
	if err != nil {
		// A foreign object at this position: appends step past it, so
		// the next record links to the last one before it.
		add(BreakAltered, e, "unreadable: %v", err)
		return
	}
	forged := e.Actor != "" && rec.Actor.Username != e.Actor
	if forged {
		add(BreakForged, e, "the record names %q as its actor, but it was created by %q (stamped by the API server)", rec.Actor.Username, e.Actor)
	}
	if e.Mutable {
		add(BreakMutable, e, "the ConfigMap is not immutable, so it could have been edited in place")
	}
	relabelled := false
	if e.Labels != nil {
		for key, want := range recordLabels(rec) {
			if key != LabelKind && e.Labels[key] != want {
				add(BreakRelabelled, e, "label %s is %q, the record says %q", key, e.Labels[key], want)
				relabelled = relabelled || key == LabelEvent
			}
		}
	}
	computed, err := hashDocument(e.Doc)
	unlinked := false
	switch {
	case err != nil || computed != rec.Hash:
		add(BreakAltered, e, "content does not match its hash %s", short(rec.Hash))
	case rec.Seq != e.Slot:
		add(BreakReordered, e, "holds record %d (hash %s), which belongs elsewhere", rec.Seq, short(rec.Hash))
		v.prevKnown = false
		v.rep.Tip = HeadState{Seq: e.Slot, Hash: rec.Hash}
		return
	case v.prevKnown && rec.Prev != v.prevHash:
		unlinked = true
		writer := ""
		if e.Actor != "" {
			writer = fmt.Sprintf(", created by %q", e.Actor)
		}
		add(BreakInserted, e, "does not link to record %d: prev is %s, record %d's hash is %s (replaced, forged, or planted ahead of the log%s)", e.Slot-1, short(rec.Prev), e.Slot-1, short(v.prevHash), writer)
	}
	// Only a record that is what its writer wrote says anything of the
	// head it found or of its session; and only one whose event label is
	// its own of its session, since the admission policy judged it by that
	// label (a review labelled as something else was let in unchecked).
	sound := err == nil && computed == rec.Hash
	if c := v.cut; c != nil && e.Slot == c.Seq && sound {
		v.cutChecked = true
		if rec.Hash != c.Hash {
			add(BreakCheckpoint, e, "the checkpoint the log was pruned to (%s) says record %d has hash %s; it has %s", c.Where, c.Seq, short(c.Hash), short(rec.Hash))
		}
	}
	if h := rec.HeadFound; h != nil && sound {
		v.note(e.Slot, *h)
	}
	if rec.Event == EventHeadRepaired && sound && !forged && (e.Labels == nil || e.Labels[LabelEvent] == string(rec.Event)) {
		// Someone allowed to move the head back looked at it here (the
		// admission policy judges a record by its event label).
		v.noted = nil
	}
	// Records a cut covers are being pruned: the sessions they belong
	// to were closed before it; and a session whose first record kept is
	// not its plan began before it (a review or ticket work since): the
	// mirror holds the whole of both.
	begunBefore := v.cut != nil && rec.Session != "" && !v.sessions.Known(rec.Session) && rec.Event != EventPlanned
	if begunBefore && sound && !v.beforeCut[rec.Session] {
		if v.beforeCut == nil {
			v.beforeCut = map[string]bool{}
		}
		v.beforeCut[rec.Session] = true
		v.rep.Warnings = append(v.rep.Warnings, Break{Kind: BreakBegunBeforeCut, Seq: e.Slot, Name: e.Name,
			Detail: fmt.Sprintf("session %s's first record here is %s, not its plan: it began before the cut, so its records here are not checked against it (audit verify --mirror reads it whole)", rec.Session, rec.Event)})
	}
	if sound && !forged && !relabelled && !unlinked && (v.cut == nil || e.Slot > v.cut.Seq) && !begunBefore {
		if _, b := v.sessions.Add(rec); b != nil {
			b.Name = e.Name
			v.rep.Breaks = append(v.rep.Breaks, *b)
		}
	}
	v.prevHash, v.prevKnown = rec.Hash, true
	v.rep.Tip = HeadState{Seq: e.Slot, Hash: rec.Hash}
}

// Report ends the check against head (nil for stores without one).
func (v *Verifier) Report(head *HeadState) Report {
	rep := v.rep
	rep.Head = head
	if c := v.cut; c != nil {
		rep.Pruned = &Pruned{Through: c.Seq, Where: c.Where, KeyID: c.KeyID, Verified: c.Verified, Time: c.Time}
		if !c.Verified {
			rep.Breaks = append(rep.Breaks, Break{Kind: BreakCutUnverified, Seq: c.Seq, Name: c.Where,
				Detail: fmt.Sprintf("the log was pruned to record %d by a checkpoint that names key %s, whose signature was not checked: pass the controller's public key with --checkpoint-key (without it, the records before the log's first may as well have been deleted by hand)", c.Seq, c.KeyID)})
		}
		if rep.Records > 0 && !v.cutChecked {
			rep.Breaks = append(rep.Breaks, Break{Kind: BreakCheckpoint, Seq: c.Seq, Name: c.Where,
				Detail: fmt.Sprintf("the log was pruned to record %d, but neither the record after it nor record %d ties the chain to the checkpoint: records after the cut were deleted", c.Seq, c.Seq)})
		}
	}
	rep.Breaks = append(append([]Break{}, v.foreign...), rep.Breaks...)
	rep.Warnings = append([]Break{}, rep.Warnings...)
	for _, n := range v.noted {
		rep.Warnings = append(rep.Warnings, n.warning())
	}
	add := func(kind BreakKind, format string, args ...any) {
		rep.Warnings = append(rep.Warnings, Break{Kind: kind, Name: "head", Detail: fmt.Sprintf(format, args...)})
	}
	if head != nil {
		switch {
		case head.Seq > rep.Tip.Seq:
			add(BreakHeadAhead, "the head names record %d but the log ends at record %d: the head was moved ahead by hand, or newer records were deleted; appends pass it over and link to the log's end", head.Seq, rep.Tip.Seq)
		case head.Seq < rep.Tip.Seq:
			add(BreakHeadBehind, "the head names record %d but the log goes on to record %d: the head was rolled back or records were added around it (an append interrupted between record and head also leaves this; the next append moves it on)", head.Seq, rep.Tip.Seq)
		case head.Hash != rep.Tip.Hash:
			add(BreakHeadMismatch, "the head names hash %s for record %d, the record has %s", short(head.Hash), head.Seq, short(rep.Tip.Hash))
		}
	}
	return rep
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	if hash == "" {
		return `""`
	}
	return hash
}
