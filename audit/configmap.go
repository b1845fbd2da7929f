package audit

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"

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
}

// NewConfigMapStore returns the store of namespace.
func NewConfigMapStore(client kubernetes.Interface, namespace string) *ConfigMapStore {
	return &ConfigMapStore{Client: client, Namespace: namespace}
}

// Append implements Store. After its own append a store remembers the tip
// and the head it wrote, and starts the next append there: two writes, no
// reads. Should another writer have appended meanwhile, the create at the
// remembered position fails and the append starts again from the head.
func (s *ConfigMapStore) Append(ctx context.Context, r *Record) error {
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	for attempt := 0; attempt < 100; attempt++ {
		tip, headCM := s.remembered()
		var wrongHead *HeadState
		if attempt > 0 || headCM == nil {
			var err error
			if tip, headCM, wrongHead, err = s.findTip(ctx); err != nil {
				return err
			}
		}
		if tip.Seq+1 > maxSeq {
			return fmt.Errorf("writing audit record: the log has reached record %d, the last a 10-digit name can hold", tip.Seq)
		}
		attemptRec := *r
		attemptRec.HeadFound = wrongHead
		doc, err := seal(&attemptRec, tip.Seq+1, tip.Hash)
		if err != nil {
			return err
		}
		if _, err := cms.Create(ctx, RecordConfigMap(s.Namespace, &attemptRec, doc), metav1.CreateOptions{}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue // another writer took this sequence number
			}
			return fmt.Errorf("writing audit record: %w", err)
		}
		*r = attemptRec
		to := HeadState{Seq: r.Seq, Hash: r.Hash}
		// The record is written, and it is what the log is: a head that
		// cannot be moved (made immutable, say) does not make the write
		// fail. Verify reports a head left behind.
		written, _ := s.advanceHead(ctx, headCM, to)
		s.remember(to, written)
		return nil
	}
	return ErrConflict
}

// maxSeq is the last sequence number a record name holds.
const maxSeq = 9_999_999_999

// remembered is the tip and head this store last wrote; headCM is nil when
// there is none to start from.
func (s *ConfigMapStore) remembered() (HeadState, *corev1.ConfigMap) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tip, s.headCM
}

// remember keeps tip and the head ConfigMap as written (nil forgets).
func (s *ConfigMapStore) remember(tip HeadState, headCM *corev1.ConfigMap) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tip, s.headCM = tip, headCM
}

// findTip reads the head and walks forward to the real tip. When the head
// names a record the log does not hold as named (absent, or with another
// hash: moved by hand), it is not believed: the tip is found from the
// records themselves, and that head is returned as wrongHead.
func (s *ConfigMapStore) findTip(ctx context.Context) (tip HeadState, headCM *corev1.ConfigMap, wrongHead *HeadState, err error) {
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	head, headCM, err := s.head(ctx)
	if err != nil {
		return HeadState{}, nil, nil, err
	}
	tip, believed, err := s.startFrom(ctx, head)
	if err != nil {
		return HeadState{}, nil, nil, err
	}
	if !believed {
		wrongHead = head
	}
	// The head may lag behind records whose writer stopped before
	// advancing it: walk forward to the real tip.
	for {
		cm, err := cms.Get(ctx, RecordName(tip.Seq+1), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return tip, headCM, wrongHead, nil
		}
		if err != nil {
			return HeadState{}, nil, nil, fmt.Errorf("reading audit record %d: %w", tip.Seq+1, err)
		}
		tip = next(tip, cm.Data[docKey])
	}
}

// next is the tip after the object at position tip.Seq+1, whose stored
// document is doc: a record there that is the one this position promises
// becomes the tip; anything else is stepped past, the next record linking
// to the last one before it, so that one foreign object cannot jam the
// log (Verify names it).
func next(tip HeadState, doc string) HeadState {
	return stepPast(tip, recordHash(tip.Seq+1, []byte(doc)))
}

// stepPast is the tip after the object at position tip.Seq+1, whose record
// hash is hash ("" for no record of that position).
func stepPast(tip HeadState, hash string) HeadState {
	if hash == "" {
		hash = tip.Hash
	}
	return HeadState{Seq: tip.Seq + 1, Hash: hash}
}

// recordHash is the hash of the record doc holds when it is the record of
// position slot, "" otherwise.
func recordHash(slot uint64, doc []byte) string {
	if rec, err := Parse(doc); err == nil && rec.Seq == slot {
		return rec.Hash
	}
	return ""
}

// startFrom is where an append starts looking for the tip: the head, when
// the record it names exists with the hash it names (believed). Otherwise
// the head was moved by hand, and the tip is the end of the run of
// positions that follows on from record 1: an object planted far beyond
// the log (to exhaust the record names, say) is not where the log goes on.
func (s *ConfigMapStore) startFrom(ctx context.Context, head *HeadState) (HeadState, bool, error) {
	if head == nil {
		return HeadState{}, true, nil
	}
	if head.Seq != 0 {
		cm, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Get(ctx, RecordName(head.Seq), metav1.GetOptions{})
		switch {
		case err == nil:
			if rec, err := Parse([]byte(cm.Data[docKey])); err == nil && rec.Seq == head.Seq && rec.Hash == head.Hash && s.couldHold(ctx, head.Seq) {
				return *head, true, nil
			}
		case !apierrors.IsNotFound(err):
			return HeadState{}, false, fmt.Errorf("reading audit record %d: %w", head.Seq, err)
		}
	}
	// Only each position's record hash is kept, not the documents.
	hashes := map[uint64]string{}
	err := s.Walk(ctx, Filter{}, func(e Entry) error {
		if e.Slot != 0 {
			hashes[e.Slot] = recordHash(e.Slot, e.Doc)
		}
		return nil
	})
	tip := HeadState{}
	for hash, ok := hashes[1]; ok; hash, ok = hashes[tip.Seq+1] {
		tip = stepPast(tip, hash)
	}
	return tip, false, err
}

// couldHold is whether the namespace holds enough objects for a log that
// reaches record seq: a head and a record planted far beyond the log (to
// use up the record names) are then not believed. The count is the API
// server's remainingItemCount of a one-item list; a server that does not
// say is believed.
func (s *ConfigMapStore) couldHold(ctx context.Context, seq uint64) bool {
	list, err := s.Client.CoreV1().ConfigMaps(s.Namespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || list.RemainingItemCount == nil {
		return true
	}
	return uint64(len(list.Items))+uint64(*list.RemainingItemCount) >= seq
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

// advanceHead moves the head forward to to, unless another writer already
// moved it further. The head only ever moves forward. It returns the head
// ConfigMap as this writer last wrote it, nil when another writer's is
// newer.
func (s *ConfigMapStore) advanceHead(ctx context.Context, headCM *corev1.ConfigMap, to HeadState) (*corev1.ConfigMap, error) {
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
			// Forward only; at the same position only to repair a hash
			// written by hand.
			if current.Seq > to.Seq || current == to {
				return nil, nil
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
			e := Entry{Name: cm.Name, Doc: []byte(cm.Data[docKey]), Actor: cm.Annotations[AnnotationActor], Unlabelled: !labelled,
				Mutable: cm.Immutable == nil || !*cm.Immutable, Labels: cm.Labels}
			if e.Labels == nil {
				e.Labels = map[string]string{}
			}
			if m != nil {
				e.Slot, _ = strconv.ParseUint(m[1], 10, 64)
			}
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
