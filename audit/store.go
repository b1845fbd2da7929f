package audit

import (
	"context"
	"crypto/ed25519"
	"errors"
)

// Store holds an audit chain.
type Store interface {
	// Append seals r (redaction, sequence number, link, hash) and stores it
	// as the chain's newest record, never forking or losing the chain when
	// writers race. r holds the stored values on return.
	Append(ctx context.Context, r *Record) error
	// Entries returns every stored record position, for Verify and listing.
	Entries(ctx context.Context, filter Filter) ([]Entry, error)
	// Walk hands every stored record position to fn in position order
	// (a ConfigMap store lists page by page, and list pages come in name
	// order, which is position order), holding one page at a time; it
	// stops at fn's first error and returns it.
	Walk(ctx context.Context, filter Filter, fn func(Entry) error) error
	// Head returns the chain head, or nil for stores without one.
	Head(ctx context.Context) (*HeadState, error)
}

// Filter narrows Entries where the store can do so cheaply (label selectors
// in the cluster). Records are filtered again after decoding, so a store may
// ignore it.
type Filter struct {
	App     string
	Event   Event
	Session string
}

// ErrConflict is returned when Append kept losing races to other writers.
var ErrConflict = errors.New("audit log is busy: too many concurrent writers, try again")

// Records decodes entries in chain order, skipping positions that do not hold
// a readable record (Verify reports those).
func Records(entries []Entry) []*Record {
	var out []*Record
	for _, e := range entries {
		if e.Slot == 0 {
			continue
		}
		if r, err := Parse(e.Doc); err == nil {
			out = append(out, r)
		}
	}
	return out
}

// collect gathers what walk hands over.
func collect(ctx context.Context, walk func(context.Context, Filter, func(Entry) error) error, filter Filter) ([]Entry, error) {
	var entries []Entry
	err := walk(ctx, filter, func(e Entry) error {
		entries = append(entries, e)
		return nil
	})
	return entries, err
}

// VerifyStore verifies a whole store as it walks it, holding one page at a
// time, and checks witnesses (none: nil) against the records it passes.
// A cluster's log pruned by the controller starts after the cut its start
// names, believed only under keys (the checkpoint public keys the auditor
// passed, by id). Should a store ever list positions out of order, the
// walk is repeated into memory and sorted, so the answer never depends on
// the order.
func VerifyStore(ctx context.Context, s Store, witnesses []Witness, keys map[string]ed25519.PublicKey) (Report, error) {
	witnessed := map[uint64]bool{}
	for _, w := range witnesses {
		witnessed[w.Seq] = true
	}
	v := NewVerifier()
	var cut *Cut
	var cutBreak *Break
	if cms, ok := s.(*ConfigMapStore); ok {
		start, err := cms.Start(ctx)
		if err != nil {
			return Report{}, err
		}
		cut, cutBreak = CutOf(start, keys)
		v.From(cut)
	}
	var passed []Entry
	err := s.Walk(ctx, Filter{}, func(e Entry) error {
		v.Add(e)
		if witnessed[e.Slot] {
			passed = append(passed, e)
		}
		return nil
	})
	if err != nil {
		return Report{}, err
	}
	var unordered []Entry
	if !v.Ordered() {
		if unordered, err = s.Entries(ctx, Filter{}); err != nil {
			return Report{}, err
		}
		passed = unordered
	}
	head, err := s.Head(ctx)
	if err != nil {
		return Report{}, err
	}
	rep := v.Report(head)
	if unordered != nil {
		rep = verifyFrom(unordered, head, cut)
	}
	if cutBreak != nil {
		rep.Breaks = append(rep.Breaks, *cutBreak)
	}
	if _, keeps := s.(*ConfigMapStore); keeps && head == nil && rep.Records > 0 {
		rep.Warnings = append(rep.Warnings, Break{Kind: BreakHeadMissing, Name: "head",
			Detail: "the log has records but no head: it was deleted; appends recreate it only while the log is short (the admission policy bounds a head the on-call group creates)"})
	}
	if witnesses != nil {
		rep.Witnesses = len(witnesses)
		rep.Breaks = append(rep.Breaks, CheckWitnesses(passed, witnesses)...)
	}
	return rep, nil
}

// Trusted decodes entries like Records, keeping only records whose content
// matches their hash and whose actor is the user the API server stamped on
// them (when stamped): what a session may be checked against.
func Trusted(entries []Entry) []*Record {
	var out []*Record
	for _, e := range entries {
		r, err := Parse(e.Doc)
		if err != nil || e.Slot == 0 || r.Seq != e.Slot {
			continue
		}
		if sum, err := hashDocument(e.Doc); err != nil || sum != r.Hash || (e.Actor != "" && e.Actor != r.Actor.Username) {
			continue
		}
		if e.Labels != nil && e.Labels[LabelEvent] != string(r.Event) {
			// The admission policy judges a record by its label: one whose
			// label says another event was let in as something else.
			continue
		}
		out = append(out, r)
	}
	return out
}
