package audit

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pruning (docs/design.md §11): with a mirror, the controller may delete
// the cluster's oldest records once the mirror holds them under lock. It
// first signs a checkpoint at the last record it deletes (the cut) and
// points the start at it; the first record kept links to the cut's hash.
// The start is one ConfigMap beside the checkpoints, which only the
// controller writes (deploy/policy): writers read it to find a pruned
// log's end (they hold no key, and trust the policy), verify believes it
// only under a public key the auditor passed.
const StartName = "kubectl-gitops-checkpoint-start"

// checkpointPrefix starts the name of every checkpoint ConfigMap, the
// start's included: the only names the controller's checkpoints have.
const checkpointPrefix = "kubectl-gitops-checkpoint-"

// BreakCutUnverified is a log that starts after a cut whose checkpoint's
// signature could not be checked: no key was passed for it, so the
// records before it may as well have been deleted by hand.
const BreakCutUnverified BreakKind = "cut-unverified"

// BreakBegunBeforeCut is a warning: a session whose first record in a
// pruned log is not its plan, which began before the cut; the session
// rules cannot check its records there, and the mirror holds it whole.
const BreakBegunBeforeCut BreakKind = "begun-before-cut"

// Cut is where a pruned log starts: the signed checkpoint at the last
// record pruned.
type Cut struct {
	Checkpoint
	Where string `json:"where"`
	// Verified is whether the signature is that of a key the verifier
	// was given.
	Verified bool `json:"verified"`
}

// CutOf reads the start the cluster holds (nil: never pruned) and checks
// its signature against keys. A start that is not a checkpoint, or whose
// signature is not the key it names, is a break and no cut: the records
// before the log's first are then missing, as after a deletion by hand.
func CutOf(start *StoredCheckpoint, keys map[string]ed25519.PublicKey) (*Cut, *Break) {
	if start == nil {
		return nil, nil
	}
	c, err := ParseCheckpoint(start.Payload)
	if err != nil {
		return nil, &Break{Kind: BreakCheckpoint, Name: start.Where, Detail: "the start of the pruned log is unreadable: " + err.Error()}
	}
	cut := &Cut{Checkpoint: c, Where: start.Where}
	key, known := keys[c.KeyID]
	if !known {
		return cut, nil
	}
	sig, err := base64.StdEncoding.DecodeString(start.Signature)
	if err != nil || !ed25519.Verify(key, []byte(start.Payload), sig) {
		return nil, &Break{Kind: BreakCheckpoint, Seq: c.Seq, Name: start.Where,
			Detail: fmt.Sprintf("the checkpoint the log was pruned to is not signed by key %s: forged or altered, so it covers no cut", c.KeyID)}
	}
	cut.Verified = true
	return cut, nil
}

// Start reads the start of a pruned log: the checkpoint at the last
// record the controller pruned; nil when it never pruned.
func (s *ConfigMapStore) Start(ctx context.Context) (*StoredCheckpoint, error) {
	cm, err := s.optional(ctx, StartName)
	if err != nil || cm == nil {
		return nil, err
	}
	return &StoredCheckpoint{Where: "configmap/" + cm.Name, SignedCheckpoint: SignedCheckpoint{Payload: cm.Data["payload"], Signature: cm.Data["signature"]}}, nil
}

// floor is the cut the start names, as writers read it: unsigned (they
// hold no key), believed because only the controller writes it; nil when
// there is none or it is unreadable.
func (s *ConfigMapStore) floor(ctx context.Context) (*HeadState, error) {
	start, err := s.Start(ctx)
	if err != nil || start == nil {
		return nil, err
	}
	c, err := ParseCheckpoint(start.Payload)
	if err != nil || c.Seq == 0 {
		return nil, nil
	}
	return &HeadState{Seq: c.Seq, Hash: c.Hash}, nil
}

// PutStart points the start at cp, the checkpoint at the new cut.
func (s *ConfigMapStore) PutStart(ctx context.Context, cp SignedCheckpoint) error {
	err := s.upsert(ctx, StartName, map[string]string{checkpointLabel: "start"}, map[string]string{"payload": cp.Payload, "signature": cp.Signature})
	if err != nil {
		return fmt.Errorf("moving the start of the audit log: %w", err)
	}
	return nil
}

// optional reads ConfigMap name, nil when there is none.
func (s *ConfigMapStore) optional(ctx context.Context, name string) (*corev1.ConfigMap, error) {
	cm, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s in namespace %s: %w", name, s.Namespace, err)
	}
	return cm, nil
}

// upsert creates the controller's ConfigMap name holding data, or
// updates the one there, with the resourceVersion read: two leaders
// never overwrite each other unseen.
func (s *ConfigMapStore) upsert(ctx context.Context, name string, labels, data map[string]string) error {
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: labels}, Data: data}, metav1.CreateOptions{})
	case err == nil:
		cm.Data = data
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	return err
}

// DeleteRecord deletes record seq from the cluster; one already gone is
// no error. The shipped admission policy lets only the controller do it.
func (s *ConfigMapStore) DeleteRecord(ctx context.Context, seq uint64) error {
	err := s.Client.CoreV1().ConfigMaps(s.Namespace).Delete(ctx, RecordName(seq), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("pruning audit record %d: %w", seq, err)
	}
	return nil
}

// Pruned is what Verify found of a pruned log's start.
type Pruned struct {
	// Through is the last record pruned, which the cut's checkpoint
	// covers.
	Through  uint64    `json:"through"`
	Where    string    `json:"where"`
	KeyID    string    `json:"keyId"`
	Verified bool      `json:"verified"`
	Time     time.Time `json:"time"`
}
