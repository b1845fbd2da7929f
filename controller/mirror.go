package controller

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// Mirroring copies the audit log to the mirror while this replica leads
// (docs/design.md §10): every record, as stored, in order, at least once;
// the mirror's own newest object says where to go on, so a new leader (or
// a restarted one) finishes the backlog with no gap and no duplicate.
type Mirroring struct {
	// Log is the cluster's audit log, Mirror its copy.
	Log    *audit.ConfigMapStore
	Mirror *audit.Mirror
	// Every is how often the log is looked at again (0: 2s).
	Every time.Duration
	// Signer signs checkpoints (nil: none), one every CheckpointRecords
	// records (0: 100) or every CheckpointInterval (0: 10m) when records
	// came since the last, into the mirror and the cluster.
	Signer             *audit.Signer
	CheckpointRecords  uint64
	CheckpointInterval time.Duration
	// WriteOnce is whether the bucket has versioning and Object Lock,
	// as published for status.
	WriteOnce bool
	// PruneAfter is the cluster's retention (0: nothing is pruned):
	// older records leave the cluster once the mirror holds them under
	// lock, after a checkpoint signed at the cut (needs Signer). Looked
	// at when leading starts and every CheckpointInterval.
	PruneAfter time.Duration
	// TSA timestamps each checkpoint (nil: none); a checkpoint it cannot
	// timestamp is written signed only, and counted as a mirror error.
	TSA *audit.TSA
}

// mirrorPass is where one leader's mirroring stands.
type mirrorPass struct {
	m       *Mirroring
	metrics *Metrics
	// newest is the newest record the mirror holds, known once found.
	newest uint64
	known  bool
	// checkpointed is the record the last checkpoint covered and when.
	checkpointed   uint64
	checkpointedAt time.Time
	// gap is the missing record last told of.
	gap uint64
	// prunedAt is when pruning was last looked at; told the records
	// pruning told of, once each, through log.
	prunedAt time.Time
	told     map[uint64]bool
	log      func(format string, args ...any)
	// pruned is the last record pruned, known once pruning looked.
	pruned uint64
	// leader is this replica; published what it last published for
	// status, and when.
	leader    string
	published audit.MirrorState
}

// mirror runs until ctx ends, copying what the mirror lacks.
func (c *Controller) mirror(ctx context.Context) {
	every := c.Mirroring.Every
	if every == 0 {
		every = 2 * time.Second
	}
	p := &mirrorPass{m: c.Mirroring, checkpointedAt: time.Now(), log: c.logf, leader: c.Identity, metrics: c.Metrics}
	for {
		if err := p.run(ctx, c.Metrics); err != nil && ctx.Err() == nil {
			c.Metrics.countMirrorError()
			c.logf("mirror: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// run copies every record after the mirror's newest, in order, signs a
// checkpoint when one is due, and tells Metrics the backlog.
func (p *mirrorPass) run(ctx context.Context, metrics *Metrics) error {
	if !p.known {
		newest, err := p.m.Mirror.Newest(ctx, 0)
		if err != nil {
			return err
		}
		p.newest, p.known, p.checkpointed = newest, true, newest
	}
	var copyErr error
	for ctx.Err() == nil {
		rec, ok, err := p.m.Log.StoredRecord(ctx, p.newest+1)
		if err != nil || !ok {
			copyErr = err
			break
		}
		if err := p.m.Mirror.PutRecord(ctx, rec.Slot, rec.Doc, rec.Actor); err != nil {
			// The mirror's newest object is the truth: found again next
			// time, so a write that landed is not written twice.
			p.known = false
			copyErr = err
			break
		}
		p.newest = rec.Slot
		if p.m.Signer != nil && p.newest-p.checkpointed >= p.checkpointRecords() {
			if err := p.checkpoint(ctx, rec); err != nil {
				copyErr = err
				break
			}
		}
	}
	if copyErr == nil && p.m.Signer != nil && p.newest > p.checkpointed && time.Since(p.checkpointedAt) >= p.checkpointInterval() {
		rec, ok, err := p.m.Log.StoredRecord(ctx, p.newest)
		if err == nil && ok {
			err = p.checkpoint(ctx, rec)
		}
		copyErr = err
	}
	if copyErr == nil && p.m.PruneAfter > 0 && p.m.Signer != nil && time.Since(p.prunedAt) >= p.checkpointInterval() {
		p.prunedAt = time.Now()
		copyErr = p.prune(ctx, metrics)
	}
	return mergeErr(copyErr, p.measure(ctx, metrics))
}

// measure tells metrics the backlog: the records the cluster's log holds
// past the mirror's newest, and how long the first of them has waited.
func (p *mirrorPass) measure(ctx context.Context, metrics *Metrics) error {
	tip, err := p.m.Log.Tip(ctx)
	if err != nil {
		return err
	}
	var backlog uint64
	var oldest time.Time
	var gap error
	if tip > p.newest {
		backlog = tip - p.newest
		rec, ok, err := p.m.Log.StoredRecord(ctx, p.newest+1)
		switch {
		case err == nil && ok:
			oldest = rec.Created
		case err == nil && p.gap != p.newest+1:
			// Told once: the records after it wait, and the backlog
			// alert fires.
			p.gap = p.newest + 1
			gap = fmt.Errorf("record %d is missing from the cluster's log and %d record(s) follow it: mirroring waits there (audit verify names the gap)", p.gap, tip-p.gap)
		}
	}
	metrics.setMirror(p.newest, backlog, oldest)
	return mergeErr(gap, p.publish(ctx, backlog, oldest))
}

// publishEvery is how often the state is published though nothing
// changed, so that status can tell a controller that stopped.
const publishEvery = 30 * time.Second

// publish writes where the mirror stands for status, when it changed or
// publishEvery passed.
func (p *mirrorPass) publish(ctx context.Context, backlog uint64, oldest time.Time) error {
	st := audit.MirrorState{Mirror: p.m.Mirror.Location().String(), WriteOnce: p.m.WriteOnce, Newest: p.newest,
		Backlog: backlog, PrunedThrough: p.pruned, Leader: p.leader, Published: time.Now().UTC().Truncate(time.Second)}
	if !oldest.IsZero() {
		at := oldest.UTC()
		st.OldestUnmirrored = &at
	}
	if st.Same(p.published) && st.Published.Sub(p.published.Published) < publishEvery {
		return nil
	}
	if err := p.m.Log.PublishMirrorState(ctx, st); err != nil {
		return err
	}
	p.published = st
	return nil
}

// checkpoint signs rec's position and writes it to the mirror, then the
// cluster.
func (p *mirrorPass) checkpoint(ctx context.Context, e audit.Entry) error {
	rec, err := audit.Parse(e.Doc)
	if err != nil {
		return err
	}
	cp := p.m.Signer.Sign(audit.Checkpoint{Seq: e.Slot, Hash: rec.Hash, Records: e.Slot, Time: time.Now().UTC()})
	if p.m.TSA != nil {
		// A timestamp authority that does not answer leaves the
		// checkpoint signed only: said, counted, never a stop.
		if token, err := p.m.TSA.Timestamp(ctx, []byte(cp.Payload)); err != nil {
			p.log("checkpoint at record %d not timestamped: %v", e.Slot, err)
			p.metrics.countMirrorError()
		} else {
			cp.Timestamp = base64.StdEncoding.EncodeToString(token)
		}
	}
	if err := p.m.Mirror.PutCheckpoint(ctx, e.Slot, cp); err != nil {
		return err
	}
	if err := p.m.Log.PutCheckpoint(ctx, e.Slot, cp); err != nil {
		return err
	}
	p.checkpointed, p.checkpointedAt = e.Slot, time.Now()
	return nil
}

func (p *mirrorPass) checkpointRecords() uint64 {
	if p.m.CheckpointRecords == 0 {
		return 100
	}
	return p.m.CheckpointRecords
}

func (p *mirrorPass) checkpointInterval() time.Duration {
	if p.m.CheckpointInterval == 0 {
		return 10 * time.Minute
	}
	return p.m.CheckpointInterval
}

func mergeErr(first, second error) error {
	if first != nil {
		return first
	}
	return second
}
