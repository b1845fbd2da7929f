package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// Pruning keeps the cluster's audit log within a retention
// (docs/design.md §11): records older than PruneAfter leave the cluster
// only once the mirror, read back, holds each of them under a
// compliance-mode lock and a checkpoint signed at the last of them (the
// cut) is there too; the start then names the cut, and the first record
// kept links to its hash. A session's records go all together, once it
// is closed: the log the tool acts on always holds each open session whole.

// pruneLimit bounds the records one pass prunes, and so the objects it
// reads back from the mirror.
const pruneLimit = 1000

// span is the first and last record of a session the cluster holds.
type span struct{ first, last uint64 }

// prunePlan is what one pass may prune: every record up to cut, of which
// held are the ones the cluster still holds (a pass interrupted after
// moving the start leaves some below it).
type prunePlan struct {
	from, cut uint64
	held      []audit.Entry
}

// prune deletes what plan allows, after reading each record and the cut's
// checkpoint back from the mirror.
func (p *mirrorPass) prune(ctx context.Context, metrics *Metrics) error {
	now := time.Now()
	from, err := p.prunedThrough(ctx)
	if err != nil {
		return err
	}
	plan, err := p.plan(ctx, from, now)
	if err != nil {
		return err
	}
	var doomed []uint64
	var cutEntry *audit.Entry
	for i, e := range plan.held {
		err := p.m.Mirror.HeldUnderLock(ctx, p.m.Mirror.RecordKey(e.Slot), e.Doc, now)
		switch {
		case err != nil && e.Slot <= plan.from:
			// Below the cut already, and not the record the mirror
			// holds: put there since, not the controller's to remove
			// (audit verify names it).
			p.tell(e.Slot, fmt.Errorf("record %d below the cut is not the mirror's, left in place: %w", e.Slot, err))
			continue
		case err != nil:
			return fmt.Errorf("not pruning record %d or after: %w", e.Slot, err)
		}
		doomed = append(doomed, e.Slot)
		if e.Slot == plan.cut {
			cutEntry = &plan.held[i]
		}
	}
	if plan.cut > plan.from {
		if cutEntry == nil {
			return fmt.Errorf("not pruning: record %d, the cut, is not in the cluster", plan.cut)
		}
		if err := p.moveStart(ctx, *cutEntry, now); err != nil {
			return err
		}
	}
	for _, seq := range doomed {
		if err := p.m.Log.DeleteRecord(ctx, seq); err != nil {
			return err
		}
	}
	p.pruned = max(plan.cut, plan.from)
	metrics.setPruned(p.pruned)
	return nil
}

// tell logs err about record seq once.
func (p *mirrorPass) tell(seq uint64, err error) {
	if p.told == nil {
		p.told = map[uint64]bool{}
	}
	if !p.told[seq] && p.log != nil {
		p.told[seq] = true
		p.log("prune: %v", err)
	}
}

// prunedThrough is the cut the start names (0: never pruned), which must
// be one this controller's key signed.
func (p *mirrorPass) prunedThrough(ctx context.Context) (uint64, error) {
	start, err := p.m.Log.Start(ctx)
	if err != nil || start == nil {
		return 0, err
	}
	cut, brk := audit.CutOf(start, p.m.Signer.Keys())
	switch {
	case brk != nil:
		return 0, fmt.Errorf("not pruning: %s", brk.Detail)
	case !cut.Verified:
		return 0, fmt.Errorf("not pruning: the start of the audit log (%s) is signed by key %s, not this controller's %s", start.Where, cut.KeyID, p.m.Signer.KeyID())
	}
	return cut.Seq, nil
}

// plan walks the cluster's log and finds the newest cut allowed after
// from: every record up to it older than PruneAfter, mirrored, not the
// newest record (the next append links to it), no session whose records
// lie on both sides of it or that is still open, and at most pruneLimit
// records on.
func (p *mirrorPass) plan(ctx context.Context, from uint64, now time.Time) (prunePlan, error) {
	plan := prunePlan{from: from}
	spans := map[string]*span{}
	sessions := audit.NewSessions()
	old, tip := from, uint64(0)
	err := p.m.Log.Walk(ctx, audit.Filter{}, func(e audit.Entry) error {
		if e.Slot == 0 {
			return nil
		}
		tip = max(tip, e.Slot)
		if e.Slot <= from+pruneLimit {
			plan.held = append(plan.held, e)
		}
		if e.Slot == old+1 && now.Sub(e.Created) >= p.m.PruneAfter {
			old = e.Slot // the run of old records after the cut, stopped by a gap
		}
		for _, r := range audit.Trusted([]audit.Entry{e}) {
			if r.Session == "" {
				continue
			}
			if sessions.Session(r.Session) == nil && r.Event != audit.EventPlanned {
				continue // begun before the cut: its first records are in the mirror
			}
			sessions.Add(r)
			s := spans[r.Session]
			if s == nil {
				s = &span{first: r.Seq}
				spans[r.Session] = s
			}
			s.last = r.Seq
		}
		return nil
	})
	if err != nil {
		return plan, err
	}
	cut := min(old, p.newest, from+pruneLimit)
	if tip > 0 {
		cut = min(cut, tip-1)
	}
	for moved := true; moved; {
		moved = false
		for id, s := range spans {
			if s.first <= cut && (s.last > cut || sessions.Session(id).Open()) {
				cut, moved = s.first-1, true
			}
		}
	}
	plan.cut = max(cut, from)
	kept := plan.held[:0]
	for _, e := range plan.held {
		if e.Slot <= plan.cut {
			kept = append(kept, e)
		}
	}
	plan.held = kept
	return plan, nil
}

// moveStart signs the checkpoint at cut (or takes the one the mirror
// holds there, if this key signed it), reads it back from the mirror
// under lock, writes it into the cluster and points the start at it.
func (p *mirrorPass) moveStart(ctx context.Context, cut audit.Entry, now time.Time) error {
	rec, err := audit.Parse(cut.Doc)
	if err != nil {
		return fmt.Errorf("not pruning: record %d, the cut, is unreadable: %w", cut.Slot, err)
	}
	held, err := p.m.Mirror.Checkpoint(ctx, cut.Slot)
	if err != nil {
		return err
	}
	var cp audit.SignedCheckpoint
	if c, _ := audit.CutOf(storedOrNil(held), p.m.Signer.Keys()); c != nil && c.Verified && c.Hash == rec.Hash {
		cp = *held
	} else {
		cp = p.m.Signer.Sign(audit.Checkpoint{Seq: cut.Slot, Hash: rec.Hash, Records: cut.Slot, Time: now.UTC()})
		if err := p.m.Mirror.PutCheckpoint(ctx, cut.Slot, cp); err != nil {
			return err
		}
	}
	body, err := audit.CheckpointBody(cp)
	if err != nil {
		return err
	}
	if err := p.m.Mirror.HeldUnderLock(ctx, p.m.Mirror.CheckpointKey(cut.Slot), body, now); err != nil {
		if errors.Is(err, audit.ErrNotHeldUnderLock) {
			return fmt.Errorf("not pruning: the cut's checkpoint: %w", err)
		}
		return err
	}
	if err := p.m.Log.PutCheckpoint(ctx, cut.Slot, cp); err != nil {
		return err
	}
	return p.m.Log.PutStart(ctx, cp)
}

func storedOrNil(cp *audit.SignedCheckpoint) *audit.StoredCheckpoint {
	if cp == nil {
		return nil
	}
	return &audit.StoredCheckpoint{Where: "mirror", SignedCheckpoint: *cp}
}
