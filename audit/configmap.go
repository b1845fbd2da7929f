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
		if attempt > 0 || headCM == nil {
			var err error
			if tip, headCM, err = s.findTip(ctx); err != nil {
				return err
			}
		}
		attemptRec := *r
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
		written, err := s.advanceHead(ctx, headCM, to)
		s.remember(to, written)
		return err
	}
	return ErrConflict
}

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

// findTip reads the head and walks forward to the real tip.
func (s *ConfigMapStore) findTip(ctx context.Context) (HeadState, *corev1.ConfigMap, error) {
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	head, headCM, err := s.head(ctx)
	if err != nil {
		return HeadState{}, nil, err
	}
	tip, err := s.startFrom(ctx, head)
	if err != nil {
		return HeadState{}, nil, err
	}
	// The head may lag behind records whose writer stopped before
	// advancing it: walk forward to the real tip.
	for {
		cm, err := cms.Get(ctx, RecordName(tip.Seq+1), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return tip, headCM, nil
		}
		if err != nil {
			return HeadState{}, nil, fmt.Errorf("reading audit record %d: %w", tip.Seq+1, err)
		}
		rec, err := Parse([]byte(cm.Data[docKey]))
		if err != nil || rec.Seq != tip.Seq+1 {
			// Something that is not the record this position promises:
			// step past it, linking to the last record, so one foreign
			// object cannot jam the log. Verify names it.
			tip = HeadState{Seq: tip.Seq + 1, Hash: tip.Hash}
			continue
		}
		tip = HeadState{Seq: tip.Seq + 1, Hash: rec.Hash}
	}
}

// startFrom is where an append starts looking for the tip: the head, when
// the record it names exists; otherwise (a head moved past the log, by
// hand) the newest record found by listing, so that a bogus head neither
// hides new records nor blocks appends.
func (s *ConfigMapStore) startFrom(ctx context.Context, head *HeadState) (HeadState, error) {
	if head == nil || head.Seq == 0 {
		return HeadState{}, nil
	}
	_, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Get(ctx, RecordName(head.Seq), metav1.GetOptions{})
	if err == nil {
		return *head, nil
	}
	if !apierrors.IsNotFound(err) {
		return HeadState{}, fmt.Errorf("reading audit record %d: %w", head.Seq, err)
	}
	tip := HeadState{}
	err = s.Walk(ctx, Filter{}, func(e Entry) error {
		if e.Slot > tip.Seq {
			if rec, err := Parse(e.Doc); err == nil && rec.Seq == e.Slot {
				tip = HeadState{Seq: e.Slot, Hash: rec.Hash}
			}
		}
		return nil
	})
	return tip, err
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
			current, err := parseHead(headCM)
			if err != nil {
				return nil, err
			}
			if current.Seq >= to.Seq {
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
		return nil, nil, err
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
