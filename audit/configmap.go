package audit

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
)

// In-cluster layout: one immutable ConfigMap per record, named by sequence
// number so that names sort in chain order and a name can be created once
// only (which is what serialises racing writers), and one head ConfigMap
// updated with a resourceVersion precondition.
const (
	recordPrefix = "kubectl-gitops-audit-"
	headName     = "kubectl-gitops-audit-head"
	docKey       = "record"

	// LabelKind marks audit ConfigMaps: "record" or "head".
	LabelKind    = KeyPrefix + "audit"
	LabelApp     = KeyPrefix + "app"
	LabelSession = KeyPrefix + "session"
	LabelEvent   = KeyPrefix + "event"

	// AnnotationActor on a record holds the user name of whoever created
	// it. The shipped admission policy (deploy/policy) makes the API server
	// refuse any other value, so Verify can hold the record's actor to it.
	AnnotationActor = KeyPrefix + "actor"
	// AnnotationRestoredBy on a record written back from the mirror
	// (audit restore-log) names the cluster admin who did it; the
	// admission policy lets only such a user, and only with it, stamp
	// another actor than themselves: the one the mirror kept.
	AnnotationRestoredBy = KeyPrefix + "restored-by"
)

// RecordSelector selects the record ConfigMaps of a namespace.
const RecordSelector = LabelKind + "=record"

var recordName = regexp.MustCompile(`^` + recordPrefix + `(\d{10})$`)

// RecordName is the ConfigMap name of record seq.
func RecordName(seq uint64) string { return fmt.Sprintf("%s%010d", recordPrefix, seq) }

// HeadName is the ConfigMap name of the chain head.
const HeadName = headName

// ConfigMapStore keeps the chain in one namespace of a cluster.
type ConfigMapStore struct {
	Client    kubernetes.Interface
	Namespace string
	// PageSize is the list page size (limit/continue); 0 means 500.
	PageSize int64
	// Listed hears how many objects Entries has read, after each page;
	// nil hears nothing.
	Listed func(n int)

	mu     sync.Mutex
	tip    HeadState
	headCM *corev1.ConfigMap
	known  bool
	// found is the end of the log as Prefetch found it, for the first
	// append to start from; nil when there is none.
	found *tipFound
	// moving is closed once the head move AppendLater started is done;
	// nil when none is under way. Every write waits for it first.
	moving chan struct{}
}

// Prefetch finds the end of the log ahead of the first append, so that a
// command can look while it does other work: the append then only
// writes. The first append starts from what was found, head included (a
// head not believed is noted in that record as in any other); should the
// log have moved on meanwhile, its create fails and it looks again. An
// error is the append's to report: it looks again itself.
func (s *ConfigMapStore) Prefetch(ctx context.Context) {
	f, err := s.findTip(ctx, HeadState{})
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.known {
		s.found = &f
	}
}

// NewConfigMapStore returns the store of namespace.
func NewConfigMapStore(client kubernetes.Interface, namespace string) *ConfigMapStore {
	return &ConfigMapStore{Client: client, Namespace: namespace}
}

// Append implements Store. After its own append a store remembers the tip
// and the head as it last saw it, and starts the next append there: two
// writes, no reads (one write while the head is ahead of the log, since
// writers never move it back). Should another writer have appended
// meanwhile, the create at the remembered position fails and the append
// looks for the tip again, from there.
func (s *ConfigMapStore) Append(ctx context.Context, r *Record) error {
	f, to, err := s.store(ctx, r)
	if err != nil {
		return err
	}
	// The record is written, and it is what the log is: a head that
	// cannot be moved (made immutable, say) does not make the write
	// fail. Verify reports a head left behind.
	seen, _ := s.advanceHead(ctx, f.headCM, to)
	s.remember(to, seen)
	return nil
}

// store writes r at the end of the log, once a head move under way is
// done, and says where the head must go.
func (s *ConfigMapStore) store(ctx context.Context, r *Record) (tipFound, HeadState, error) {
	s.WaitHead()
	f, err := s.write(ctx, r, true, func(rec *Record, f tipFound) { rec.HeadFound = f.unnoted() })
	return f, HeadState{Seq: r.Seq, Hash: r.Hash}, err
}

// AppendLater is Append returning once the record is stored: the head is
// moved in the background, and the store's next write (and WaitHead)
// waits for that first, so the head still moves one record at a time, in
// order. For a writer whose next step needs the record, not the head: a
// break-glass pauses once its planned record is stored, a round trip
// sooner. The move outlives a cancelled ctx (30 s at most), as an undo
// does; a process killed before it ends leaves the head one record
// behind, as a kill between Append's two writes does.
func (s *ConfigMapStore) AppendLater(ctx context.Context, r *Record) error {
	f, to, err := s.store(ctx, r)
	if err != nil {
		return err
	}
	moving := make(chan struct{})
	s.mu.Lock()
	s.moving = moving
	s.mu.Unlock()
	go func() {
		defer close(moving)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		seen, _ := s.advanceHead(ctx, f.headCM, to)
		s.remember(to, seen)
	}()
	return nil
}

// WaitHead waits for the head move AppendLater started, if one is under
// way.
func (s *ConfigMapStore) WaitHead() {
	s.mu.Lock()
	moving := s.moving
	s.mu.Unlock()
	if moving != nil {
		<-moving
	}
}

// RepairHead puts the head back on the log, whatever it says (ahead of
// the log, behind it, another hash, unreadable, or missing): it appends r
// as an EventHeadRepaired record saying what the head said before
// (HeadBefore) at the log's end, found as an append finds it, and points
// the head at that record, backwards too. The shipped admission policy
// lets only users outside the on-call, auditor and reviewer groups record
// a repair or move the head back: anyone else's attempt fails with the
// API server's Forbidden error, and nothing is written.
func (s *ConfigMapStore) RepairHead(ctx context.Context, r *Record) error {
	s.WaitHead()
	f, err := s.write(ctx, r, false, func(rec *Record, f tipFound) { rec.Event, rec.HeadBefore = EventHeadRepaired, f.head })
	if err != nil {
		return err
	}
	to := HeadState{Seq: r.Seq, Hash: r.Hash}
	headCM, err := s.writeHead(ctx, f.headCM, to, func(current HeadState) (bool, error) {
		// Left alone only when it names the repair, or a record another
		// writer appended after it.
		if current.Seq <= to.Seq {
			return current == to, nil
		}
		return (&positions{s: s}).holds(ctx, current)
	})
	if err != nil {
		return fmt.Errorf("the repair is audit record %d, but the head could not be moved to it: %w", r.Seq, err)
	}
	s.remember(to, headCM)
	return nil
}

// write seals r at the end of the log and creates it, looking for the end
// again whenever another writer took the position first. remembered
// starts at the tip this store last wrote, with no reads; note fills in
// what the record says of the head found on the way (none on that path).
func (s *ConfigMapStore) write(ctx context.Context, r *Record, remembered bool, note func(*Record, tipFound)) (tipFound, error) {
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	var f tipFound
	known := false
	if remembered {
		f.tip, f.headCM, known = s.remembered()
		if found := s.prefetched(); !known && found != nil {
			f, known = *found, true
		}
	}
	for attempt := 0; attempt < 100; attempt++ {
		if attempt > 0 || !known {
			found, err := s.findTip(ctx, f.tip)
			if err != nil {
				return tipFound{}, err
			}
			f = found
		}
		if f.tip.Seq+1 > maxSeq {
			return tipFound{}, fmt.Errorf("writing audit record: the log has reached record %d, the last a 10-digit name can hold", f.tip.Seq)
		}
		attemptRec := *r
		note(&attemptRec, f)
		doc, err := seal(&attemptRec, f.tip.Seq+1, f.tip.Hash)
		if err != nil {
			return tipFound{}, err
		}
		if _, err := cms.Create(ctx, RecordConfigMap(s.Namespace, &attemptRec, doc), metav1.CreateOptions{}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue // another writer took this sequence number
			}
			return tipFound{}, fmt.Errorf("writing the %s audit record: %w", attemptRec.Event, err)
		}
		*r = attemptRec
		return f, nil
	}
	return tipFound{}, ErrConflict
}

// maxSeq is the last sequence number a record name holds.
const maxSeq = 9_999_999_999

// remembered is the tip and head this store last wrote or saw; known is
// false until it has appended.
func (s *ConfigMapStore) remembered() (tip HeadState, headCM *corev1.ConfigMap, known bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tip, s.headCM, s.known
}

// prefetched takes what Prefetch found, once.
func (s *ConfigMapStore) prefetched() *tipFound {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.found
	s.found = nil
	return f
}

// remember keeps tip and the head ConfigMap as last seen (nil: none).
func (s *ConfigMapStore) remember(tip HeadState, headCM *corev1.ConfigMap) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tip, s.headCM, s.known, s.found = tip, headCM, true, nil
}

// tipFound is the end of the log as findTip found it, and the head beside
// it.
type tipFound struct {
	tip HeadState
	// last is the newest record, the one tip.Hash is the hash of (nil
	// when the log holds none).
	last *Record
	// head is the head as read (nil: there is none) and headCM its
	// ConfigMap; believed is whether it names a record the log holds as
	// named.
	head     *HeadState
	headCM   *corev1.ConfigMap
	believed bool
}

// unnoted is the head the next record notes (HeadFound): one that was not
// believed, unless the newest record already notes that same head (a head
// left far ahead is noted once, not in every record until it is repaired).
func (f tipFound) unnoted() *HeadState {
	if f.head == nil || f.believed {
		return nil
	}
	if f.last != nil && f.last.HeadFound != nil && *f.last.HeadFound == *f.head {
		return nil
	}
	return f.head
}

// findTip reads the head and finds the log's end from there. The head is
// believed only when the record it names exists with the hash it names
// and the namespace holds enough objects for a log that long; otherwise
// (moved by hand, ahead of the log, a record planted far beyond it) the
// end is found from from: the tip this store last wrote, or the start.
// Either way the end is probed record by record name, never listed: a
// head left ahead of the log costs each append a few dozen reads, not a
// listing of the namespace.
func (s *ConfigMapStore) findTip(ctx context.Context, from HeadState) (tipFound, error) {
	var f tipFound
	var err error
	if f.head, f.headCM, err = s.head(ctx); err != nil {
		return tipFound{}, err
	}
	bound := s.objects(ctx)
	pos := &positions{s: s}
	lo := from
	// A head is believed only on a record that links to the log below
	// it: a record planted ahead of the log, with the head moved onto it
	// (two requests for anyone who may create records), would have every
	// append skip the positions under it for good.
	var floorAt HeadState
	believe := func() error {
		if f.head != nil && f.head.Seq != 0 && f.head.Seq <= bound {
			if f.believed, err = pos.holds(ctx, *f.head); f.believed && err == nil {
				doc, _, _ := pos.at(ctx, f.head.Seq)
				f.believed, err = pos.linked(ctx, f.head.Seq, recordAt(f.head.Seq, doc), floorAt)
			}
		}
		return err
	}
	if err := believe(); err != nil {
		return tipFound{}, err
	}
	var floor *HeadState
	if !f.believed {
		// A log the controller pruned starts after its cut: the search
		// starts there, and the namespace's objects bound the records
		// after it. Read only when the head is not believed otherwise,
		// so an unpruned log costs no request more.
		if floor, err = s.floor(ctx); err != nil {
			return tipFound{}, err
		}
		if floor != nil {
			bound += floor.Seq
			floorAt = *floor
			if err := believe(); err != nil {
				return tipFound{}, err
			}
			if floor.Seq > lo.Seq {
				lo = *floor
			}
		}
	}
	if f.believed && f.head.Seq > lo.Seq {
		lo = *f.head
	}
	f.tip, f.last, err = pos.end(ctx, lo, bound, floor)
	return f, err
}

// objects is how many objects the namespace holds, the most records a log
// there can reach: the API server's remainingItemCount of a one-item
// list. A server that does not say bounds nothing (maxSeq).
func (s *ConfigMapStore) objects(ctx context.Context) uint64 {
	list, err := s.Client.CoreV1().ConfigMaps(s.Namespace).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case err != nil:
		return maxSeq
	case list.RemainingItemCount != nil:
		return uint64(len(list.Items)) + uint64(*list.RemainingItemCount)
	case list.Continue == "":
		return uint64(len(list.Items)) // all of them
	}
	return maxSeq
}

// positions reads record positions by name, each once.
type positions struct {
	s *ConfigMapStore
	// docs holds each position read: its document, nil for none there.
	docs map[uint64]*string
}

// at is the stored document at position seq, and whether an object is
// there at all.
func (p *positions) at(ctx context.Context, seq uint64) (string, bool, error) {
	if doc, ok := p.docs[seq]; ok {
		return derefDoc(doc)
	}
	if p.docs == nil {
		p.docs = map[uint64]*string{}
	}
	cm, err := p.s.Client.CoreV1().ConfigMaps(p.s.Namespace).Get(ctx, RecordName(seq), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		p.docs[seq] = nil
	case err != nil:
		return "", false, fmt.Errorf("reading audit record %d: %w", seq, err)
	default:
		doc := cm.Data[docKey]
		p.docs[seq] = &doc
	}
	return derefDoc(p.docs[seq])
}

func derefDoc(doc *string) (string, bool, error) {
	if doc == nil {
		return "", false, nil
	}
	return *doc, true, nil
}

// holds says whether position h.Seq holds the record h names.
func (p *positions) holds(ctx context.Context, h HeadState) (bool, error) {
	doc, ok, err := p.at(ctx, h.Seq)
	if err != nil || !ok {
		return false, err
	}
	rec := recordAt(h.Seq, doc)
	return rec != nil && rec.Hash == h.Hash, nil
}

// end finds the end of the run of positions the log holds from lo (a
// position it holds, with its chain hash; zero for the start), never
// beyond bound: steps that double from lo until a position is empty, then
// halving between the last position held and the first empty one, about
// 2·log2 of the distance in reads. The tip's hash is the newest record's
// at or before the end, so that objects that are not records (Verify
// names them) are stepped past and cannot jam the log. An empty position
// met on the way back means the run ends below it: the search starts
// again under it. Objects planted beyond the end can still draw the
// search over a gap below them, but never past bound: no further than
// the namespace holds objects. A pruned log's search never goes below
// floor, its cut (nil: none): with no record after it, the tip is the
// cut, whose hash the next record links to.
func (p *positions) end(ctx context.Context, lo HeadState, bound uint64, floor *HeadState) (HeadState, *Record, error) {
	bottom := HeadState{}
	if floor != nil {
		bottom = *floor
	}
	for {
		bound = max(bound, lo.Seq)
		held, empty := lo.Seq, bound+1
		for step := uint64(1); held+step < empty; step *= 2 {
			_, ok, err := p.at(ctx, held+step)
			if err != nil {
				return HeadState{}, nil, err
			}
			if !ok {
				empty = held + step
				break
			}
			held += step
		}
		held, err := halve(held, empty, func(seq uint64) (bool, error) {
			_, ok, err := p.at(ctx, seq)
			return ok, err
		})
		if err != nil {
			return HeadState{}, nil, err
		}
		gap := uint64(0)
		for seq := held; seq > bottom.Seq && gap == 0; seq-- {
			doc, ok, err := p.at(ctx, seq)
			switch {
			case err != nil:
				return HeadState{}, nil, err
			case !ok:
				gap = seq
			default:
				rec := recordAt(seq, doc)
				if rec == nil {
					continue // not a record: stepped past
				}
				// No writer appends past an empty position (a prune
				// cuts below the floor only): a record over one was
				// planted ahead of the log.
				_, overGap, err := p.below(ctx, seq, bottom)
				if err != nil {
					return HeadState{}, nil, err
				}
				if !overGap {
					return HeadState{Seq: held, Hash: rec.Hash}, rec, nil
				}
				// Planted ahead of the log, over an empty position:
				// the position is the next append's. (One planted
				// over records is built on, and verify names it: an
				// honest record is never stepped past, so the chain
				// never forks.)
			}
		}
		if gap == 0 {
			// No record at all yet (after the cut, whose hash the next
			// record links to).
			return HeadState{Seq: held, Hash: bottom.Hash}, nil, nil
		}
		if gap <= lo.Seq {
			lo = bottom
		}
		bound = gap - 1
	}
}

// linked says whether rec, the record at position seq, links to the log
// below it: its prev is the hash of the newest record under it (objects
// that are not records are stepped past, as appends step past them), or
// the floor's where nothing is between them. One over an empty position
// links to nothing.
func (p *positions) linked(ctx context.Context, seq uint64, rec *Record, floor HeadState) (bool, error) {
	if rec == nil {
		return false, nil
	}
	prev, gap, err := p.below(ctx, seq, floor)
	switch {
	case err != nil || gap:
		return false, err
	case prev == nil:
		return rec.Prev == floor.Hash, nil
	}
	return rec.Prev == prev.Hash, nil
}

// below is the newest record under position seq, past objects that are
// not records: nil when the floor comes first; gap when an empty position
// does.
func (p *positions) below(ctx context.Context, seq uint64, floor HeadState) (rec *Record, gap bool, err error) {
	for at := seq - 1; at > floor.Seq; at-- {
		doc, ok, err := p.at(ctx, at)
		switch {
		case err != nil:
			return nil, false, err
		case !ok:
			return nil, true, nil
		}
		if rec := recordAt(at, doc); rec != nil {
			return rec, false, nil
		}
	}
	return nil, false, nil
}

// halve narrows a position held and a later one found empty down to
// neighbours, probing the middle with has: the run of positions held from
// held ends at the position it returns.
func halve(held, empty uint64, has func(uint64) (bool, error)) (uint64, error) {
	for empty-held > 1 {
		mid := held + (empty-held)/2
		ok, err := has(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			held = mid
		} else {
			empty = mid
		}
	}
	return held, nil
}

// recordAt is the record doc holds when it is the record of position
// slot, nil otherwise.
func recordAt(slot uint64, doc string) *Record {
	if rec, err := Parse([]byte(doc)); err == nil && rec.Seq == slot {
		return rec
	}
	return nil
}

// RecordConfigMap is the immutable ConfigMap that stores sealed record r,
// whose stored document is doc.
func RecordConfigMap(namespace string, r *Record, doc []byte) *corev1.ConfigMap {
	immutable := true
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: RecordName(r.Seq), Namespace: namespace, Labels: recordLabels(r),
			Annotations: map[string]string{AnnotationActor: r.Actor.Username}},
		Data:      map[string]string{docKey: string(doc)},
		Immutable: &immutable,
	}
}

func recordLabels(r *Record) map[string]string {
	labels := map[string]string{LabelKind: "record", LabelEvent: string(r.Event)}
	if r.Application != nil && labelValueOK(r.Application.Name) {
		labels[LabelApp] = r.Application.Name
	}
	if labelValueOK(r.Session) {
		labels[LabelSession] = r.Session
	}
	return labels
}

func labelValueOK(v string) bool {
	return v != "" && len(validation.IsValidLabelValue(v)) == 0
}

// advanceHead moves the head forward to to, unless it is there already or
// further: moved on by another writer, or ahead of the log by hand. Writers
// never move it back (only RepairHead does). It returns the head ConfigMap
// as last written or read, for the next append to start from.
func (s *ConfigMapStore) advanceHead(ctx context.Context, headCM *corev1.ConfigMap, to HeadState) (*corev1.ConfigMap, error) {
	return s.writeHead(ctx, headCM, to, func(current HeadState) (bool, error) {
		// At the same position only to repair a hash written by hand.
		return current.Seq > to.Seq || current == to, nil
	})
}

// writeHead points the head at to, creating it when there is none,
// unless keep says to leave the head it finds as it is. It returns the
// head ConfigMap as last written or read.
func (s *ConfigMapStore) writeHead(ctx context.Context, headCM *corev1.ConfigMap, to HeadState, keep func(current HeadState) (bool, error)) (*corev1.ConfigMap, error) {
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	for attempt := 0; attempt < 100; attempt++ {
		if headCM == nil {
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: headName, Namespace: s.Namespace, Labels: map[string]string{LabelKind: "head"}},
				Data:       headData(to),
			}
			created, err := cms.Create(ctx, cm, metav1.CreateOptions{})
			if err == nil {
				return created, nil
			}
			if !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("writing the audit head: %w", err)
			}
		} else {
			current, _ := parseHead(headCM) // an unreadable head is overwritten
			if done, err := keep(current); done || err != nil {
				return headCM, err
			}
			update := headCM.DeepCopy()
			update.Data = headData(to)
			// Update carries headCM's resourceVersion: a concurrent
			// writer's change makes it fail with a conflict instead of
			// being overwritten.
			updated, err := cms.Update(ctx, update, metav1.UpdateOptions{})
			if err == nil {
				return updated, nil
			}
			if !apierrors.IsConflict(err) {
				return nil, fmt.Errorf("writing the audit head: %w", err)
			}
		}
		var err error
		if _, headCM, err = s.head(ctx); err != nil {
			return nil, err
		}
	}
	return nil, ErrConflict
}

func headData(h HeadState) map[string]string {
	return map[string]string{"seq": strconv.FormatUint(h.Seq, 10), "hash": h.Hash}
}

func parseHead(cm *corev1.ConfigMap) (HeadState, error) {
	seq, err := strconv.ParseUint(cm.Data["seq"], 10, 64)
	if err != nil {
		return HeadState{}, fmt.Errorf("audit head %s/%s is unreadable (seq %q)", cm.Namespace, cm.Name, cm.Data["seq"])
	}
	return HeadState{Seq: seq, Hash: cm.Data["hash"]}, nil
}

// head returns the head and its ConfigMap, both nil when no record was ever
// written.
func (s *ConfigMapStore) head(ctx context.Context) (*HeadState, *corev1.ConfigMap, error) {
	cm, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Get(ctx, headName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the audit head in namespace %s: %w", s.Namespace, err)
	}
	h, err := parseHead(cm)
	if err != nil {
		// Unreadable (written by hand): a head that names nothing, which
		// the next append does not believe and overwrites.
		return &HeadState{Hash: cm.Data["hash"] + " (unreadable seq " + strconv.Quote(cm.Data["seq"]) + ")"}, cm, nil
	}
	return &h, cm, nil
}

// Head implements Store.
func (s *ConfigMapStore) Head(ctx context.Context) (*HeadState, error) {
	h, _, err := s.head(ctx)
	return h, err
}

// Entries implements Store.
func (s *ConfigMapStore) Entries(ctx context.Context, filter Filter) ([]Entry, error) {
	return collect(ctx, s.Walk, filter)
}

// Walk implements Store, listing page by page. Without a filter every
// ConfigMap of the namespace is listed, so that a record whose label was
// removed is still found by its name (and reported by Verify).
func (s *ConfigMapStore) Walk(ctx context.Context, filter Filter, fn func(Entry) error) error {
	selector := ""
	if labelValueOK(filter.App) || labelValueOK(string(filter.Event)) || labelValueOK(filter.Session) {
		selector = RecordSelector
	}
	if labelValueOK(filter.Session) {
		selector += "," + LabelSession + "=" + filter.Session
	}
	if labelValueOK(filter.App) {
		selector += "," + LabelApp + "=" + filter.App
	}
	if labelValueOK(string(filter.Event)) {
		selector += "," + LabelEvent + "=" + string(filter.Event)
	}
	return s.walkSelected(ctx, selector, fn)
}

// walkSelected is Walk over the ConfigMaps selector selects ("" for all).
func (s *ConfigMapStore) walkSelected(ctx context.Context, selector string, fn func(Entry) error) error {
	limit := s.PageSize
	if limit == 0 {
		limit = 500
	}
	read := 0
	opts := metav1.ListOptions{LabelSelector: selector, Limit: limit}
	for {
		list, err := s.Client.CoreV1().ConfigMaps(s.Namespace).List(ctx, opts)
		if err != nil {
			return fmt.Errorf("listing audit records in namespace %s: %w", s.Namespace, err)
		}
		for _, cm := range list.Items {
			m := recordName.FindStringSubmatch(cm.Name)
			labelled := cm.Labels[LabelKind] == "record"
			if m == nil && !labelled {
				continue // not part of the log (the head, Argo CD's own)
			}
			e := entryOf(&cm)
			e.Unlabelled = !labelled
			read++
			if err := fn(e); err != nil {
				return err
			}
		}
		if s.Listed != nil {
			s.Listed(read)
		}
		if list.Continue == "" {
			return nil
		}
		opts.Continue = list.Continue
	}
}

// entryOf is the log entry a record ConfigMap holds.
func entryOf(cm *corev1.ConfigMap) Entry {
	e := Entry{Name: cm.Name, Doc: []byte(cm.Data[docKey]), Actor: cm.Annotations[AnnotationActor],
		Mutable: cm.Immutable == nil || !*cm.Immutable, Labels: cm.Labels, Created: cm.CreationTimestamp.Time,
		RestoredBy: cm.Annotations[AnnotationRestoredBy]}
	if e.Labels == nil {
		e.Labels = map[string]string{}
	}
	if m := recordName.FindStringSubmatch(cm.Name); m != nil {
		e.Slot, _ = strconv.ParseUint(m[1], 10, 64)
	}
	return e
}

// StoredRecord is what position seq holds, read by its name, and whether
// anything is there.
func (s *ConfigMapStore) StoredRecord(ctx context.Context, seq uint64) (Entry, bool, error) {
	cm, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Get(ctx, RecordName(seq), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return Entry{}, false, nil
	case err != nil:
		return Entry{}, false, fmt.Errorf("reading audit record %d: %w", seq, err)
	}
	return entryOf(cm), true, nil
}

// Tip is the position of the log's end, found as an append finds it.
func (s *ConfigMapStore) Tip(ctx context.Context) (uint64, error) {
	f, err := s.findTip(ctx, HeadState{})
	return f.tip.Seq, err
}
