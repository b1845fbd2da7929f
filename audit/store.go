package audit

import (
	"context"
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

// VerifyStore reads a whole store and verifies it.
func VerifyStore(ctx context.Context, s Store) (Report, error) {
	entries, err := s.Entries(ctx, Filter{})
	if err != nil {
		return Report{}, err
	}
	head, err := s.Head(ctx)
	if err != nil {
		return Report{}, err
	}
	return Verify(entries, head), nil
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
		out = append(out, r)
	}
	return out
}
