package audit

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kinds of break found comparing the cluster's log with its mirror.
const (
	// BreakMissingInCluster is a record the mirror holds that the
	// cluster's log does not: deleted, or lost with the namespace.
	BreakMissingInCluster BreakKind = "missing-in-cluster"
	// BreakMirrorDiffers is a record the cluster holds with other bytes
	// than the mirror kept.
	BreakMirrorDiffers BreakKind = "differs-from-mirror"
	// BreakUnmirrored is a record in the cluster that never reached the
	// mirror within the backlog bound (a warning while within it).
	BreakUnmirrored BreakKind = "unmirrored"
)

// MirrorSummary is what verify --mirror read.
type MirrorSummary struct {
	Location string `json:"location"`
	// Newest is the newest record the mirror holds.
	Newest uint64 `json:"newest"`
	// Checkpoints were read; Verified of them were signed by a key the
	// auditor passed.
	Checkpoints int `json:"checkpoints"`
	Verified    int `json:"verified"`
	// Timestamped of them carry a timestamp authority's token that holds
	// and chains to a root the auditor passed (--tsa-certs).
	Timestamped int `json:"timestamped,omitempty"`
	// Compared is whether the cluster's log was compared with it.
	Compared bool `json:"comparedWithCluster"`
	// PrunedThrough is the last record the controller pruned from the
	// cluster under a checkpoint signed by a key the auditor passed:
	// the mirror alone holds the records up to it.
	PrunedThrough uint64 `json:"prunedThrough,omitempty"`
}

// MirrorCheck verifies a mirror, alone or against the cluster.
type MirrorCheck struct {
	Mirror *Mirror
	// Cluster is the cluster's log to compare with (nil: the mirror
	// alone, on the auditor's laptop).
	Cluster *ConfigMapStore
	// Keys are the checkpoint public keys the auditor holds, by id.
	Keys map[string]ed25519.PublicKey
	// TSA is what the auditor trusts of timestamp authorities (nil: a
	// timestamp is checked against its checkpoint alone).
	TSA *TSATrust
	// Bound is how long a cluster record may wait for the mirror before
	// it is a break (the controller's backlog bound).
	Bound time.Duration
	Now   time.Time
}

// Verify checks the mirror's chain as verify checks the cluster's, names
// every object rewritten or deleted there, checks every checkpoint (the
// mirror's, and the cluster's with a cluster) against the mirror's records
// and the auditor's keys, and with a cluster compares the two record by
// record.
func (c MirrorCheck) Verify(ctx context.Context) (Report, *MirrorSummary, error) {
	sums := map[uint64][32]byte{}
	hashes := map[uint64]string{}
	v := NewVerifier()
	err := c.Mirror.Walk(ctx, Filter{}, func(e Entry) error {
		v.Add(e)
		if e.Slot != 0 {
			sums[e.Slot] = sha256.Sum256(e.Doc)
			if r, err := Parse(e.Doc); err == nil {
				hashes[e.Slot] = r.Hash
			}
		}
		return nil
	})
	if err != nil {
		return Report{}, nil, err
	}
	rep := v.Report(nil)
	rep.Breaks = append(rep.Breaks, c.Mirror.Findings()...)
	sum := &MirrorSummary{Location: c.Mirror.Location().String(), Newest: rep.Tip.Seq, Compared: c.Cluster != nil}
	cps, err := c.Mirror.Checkpoints(ctx)
	if err != nil {
		return Report{}, nil, err
	}
	if c.Cluster != nil {
		inCluster, err := c.Cluster.Checkpoints(ctx)
		if err != nil {
			return Report{}, nil, err
		}
		cps = append(cps, inCluster...)
		// Records up to a cut are pruned, not missing: when its
		// checkpoint is signed by a key the auditor passed and names
		// the hash the mirror holds there (else CheckCheckpoints names
		// it, and they are missing).
		start, err := c.Cluster.Start(ctx)
		if err != nil {
			return Report{}, nil, err
		}
		if cut, _ := CutOf(start, c.Keys); cut != nil && cut.Verified && hashes[cut.Seq] == cut.Hash {
			sum.PrunedThrough = cut.Seq
		}
		if rep.Breaks, err = c.compare(ctx, rep.Breaks, rep.Tip.Seq, sum.PrunedThrough, sums, &rep.Warnings); err != nil {
			return Report{}, nil, err
		}
	}
	breaks, warnings, verified := CheckCheckpoints(cps, hashes, c.Keys)
	rep.Breaks = append(rep.Breaks, breaks...)
	rep.Warnings = append(rep.Warnings, warnings...)
	sum.Checkpoints, sum.Verified = len(cps), verified
	breaks, warnings, sum.Timestamped = CheckTimestamps(cps, c.Keys, c.TSA)
	rep.Breaks = append(rep.Breaks, breaks...)
	rep.Warnings = append(rep.Warnings, warnings...)
	return rep, sum, nil
}

// compare names every record the two logs disagree on.
func (c MirrorCheck) compare(ctx context.Context, breaks []Break, newest, pruned uint64, sums map[uint64][32]byte, warnings *[]Break) ([]Break, error) {
	seen := map[uint64]bool{}
	err := c.Cluster.Walk(ctx, Filter{}, func(e Entry) error {
		if e.Slot == 0 {
			return nil
		}
		seen[e.Slot] = true
		want, mirrored := sums[e.Slot]
		switch {
		case mirrored && want != sha256.Sum256(e.Doc):
			breaks = append(breaks, Break{Kind: BreakMirrorDiffers, Seq: e.Slot, Name: e.Name,
				Detail: fmt.Sprintf("the cluster's record %d is not what the mirror kept: it was replaced after it was mirrored", e.Slot)})
		case !mirrored && e.Slot <= newest:
			breaks = append(breaks, Break{Kind: BreakUnmirrored, Seq: e.Slot, Name: e.Name,
				Detail: fmt.Sprintf("the mirror holds records after %d but not it: it was never mirrored, or deleted from the mirror", e.Slot)})
		case !mirrored && c.Now.Sub(e.Created) > c.Bound:
			breaks = append(breaks, Break{Kind: BreakUnmirrored, Seq: e.Slot, Name: e.Name,
				Detail: fmt.Sprintf("written %s ago and not in the mirror, past the backlog bound of %s: is the controller mirroring? (kubectl_gitops_mirror_backlog_records)", c.Now.Sub(e.Created).Round(time.Second), c.Bound)})
		case !mirrored:
			*warnings = append(*warnings, Break{Kind: BreakUnmirrored, Seq: e.Slot, Name: e.Name,
				Detail: fmt.Sprintf("not in the mirror yet, written %s ago (within the backlog bound of %s)", c.Now.Sub(e.Created).Round(time.Second), c.Bound)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for seq := pruned + 1; seq <= newest; seq++ {
		if _, mirrored := sums[seq]; mirrored && !seen[seq] {
			breaks = append(breaks, Break{Kind: BreakMissingInCluster, Seq: seq, Name: RecordName(seq),
				Detail: fmt.Sprintf("the mirror holds record %d; the cluster's log does not: deleted (audit restore-log --mirror puts it back)", seq)})
		}
	}
	return breaks, nil
}

// Restored is what Restore did.
type Restored struct {
	// Written records were created from the mirror; Present were in the
	// cluster already, byte for byte.
	Written []uint64 `json:"written"`
	Present int      `json:"present"`
	// Head is the head as it names the log's end now.
	Head HeadState `json:"head"`
}

// ErrRestoreConflict is a record in the cluster that the mirror holds
// other bytes for: restore overwrites nothing.
var ErrRestoreConflict = fmt.Errorf("the cluster holds other bytes than the mirror")

// Restore writes back into the cluster every record of entries (the
// mirror's, verified) that the log lacks after its cut (a log the
// controller pruned keeps what it pruned in the mirror only), each as the
// immutable ConfigMap it was, stamped with the actor the mirror kept and the restorer's name
// (AnnotationRestoredBy), and points the head at the newest. It refuses,
// writing nothing, when any record there holds other bytes. The shipped
// admission policy lets only a cluster admin (system:masters) restore.
func (s *ConfigMapStore) Restore(ctx context.Context, entries []Entry, restorer string) (Restored, error) {
	var out Restored
	var missing []Entry
	pos := &positions{s: s}
	floor, err := s.floor(ctx)
	if err != nil {
		return out, err
	}
	for _, e := range entries {
		if floor != nil && e.Slot <= floor.Seq {
			continue // pruned by the controller: the mirror keeps it
		}
		doc, ok, err := pos.at(ctx, e.Slot)
		switch {
		case err != nil:
			return out, err
		case ok && doc != string(e.Doc):
			return out, fmt.Errorf("record %d: %w; nothing was written", e.Slot, ErrRestoreConflict)
		case ok:
			out.Present++
		default:
			missing = append(missing, e)
		}
	}
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	for _, e := range missing {
		r, err := Parse(e.Doc)
		if err != nil {
			return out, fmt.Errorf("record %d in the mirror is unreadable: %w", e.Slot, err)
		}
		cm := RecordConfigMap(s.Namespace, r, e.Doc)
		cm.Name = RecordName(e.Slot)
		if e.Actor != "" {
			cm.Annotations[AnnotationActor] = e.Actor
		}
		cm.Annotations[AnnotationRestoredBy] = restorer
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return out, fmt.Errorf("writing back record %d: %w", e.Slot, err)
		}
		out.Written = append(out.Written, e.Slot)
	}
	if len(entries) == 0 {
		return out, nil
	}
	last := entries[len(entries)-1]
	r, err := Parse(last.Doc)
	if err != nil {
		return out, err
	}
	out.Head = HeadState{Seq: last.Slot, Hash: r.Hash}
	_, headCM, err := s.head(ctx)
	if err != nil {
		return out, err
	}
	if _, err := s.advanceHead(ctx, headCM, out.Head); err != nil {
		return out, err
	}
	return out, nil
}
