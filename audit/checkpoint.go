package audit

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A checkpoint says, signed, that the log held Records records ending in
// record Seq with hash Hash at Time. Its payload is plain text so that an
// auditor can check it with openssl alone (docs/audit.md, the auditor's recipe):
//
//	kubectl-gitops checkpoint v1
//	seq 42
//	hash 3f1c…
//	records 42
//	time 2026-01-02T03:04:05Z
//	key 9a8b7c6d5e4f3a2b
type Checkpoint struct {
	Seq     uint64    `json:"seq"`
	Hash    string    `json:"hash"`
	Records uint64    `json:"records"`
	Time    time.Time `json:"time"`
	// KeyID names the signing key: the first 16 hex digits of the
	// SHA-256 of its public key (PKIX, DER), so a rotated key has another.
	KeyID string `json:"keyId"`
}

const checkpointHeader = "kubectl-gitops checkpoint v1"

// Payload is the text the signature covers.
func (c Checkpoint) Payload() string {
	return fmt.Sprintf("%s\nseq %d\nhash %s\nrecords %d\ntime %s\nkey %s\n", checkpointHeader, c.Seq, c.Hash, c.Records,
		c.Time.UTC().Format(time.RFC3339), c.KeyID)
}

// SignedCheckpoint is a checkpoint as stored, in the mirror and the
// cluster: the payload, its ed25519 signature (base64) and, optionally, a
// timestamp authority's token over it.
type SignedCheckpoint struct {
	Payload   string `json:"payload"`
	Signature string `json:"signature"`
	// Timestamp is an RFC 3161 timestamp token over the payload (DER,
	// base64) from the controller's --tsa, when it has one.
	Timestamp string `json:"timestamp,omitempty"`
}

// ParseCheckpoint reads a payload.
func ParseCheckpoint(payload string) (Checkpoint, error) {
	var c Checkpoint
	lines := strings.Split(strings.TrimSuffix(payload, "\n"), "\n")
	if len(lines) != 6 || lines[0] != checkpointHeader {
		return c, fmt.Errorf("not a kubectl-gitops checkpoint")
	}
	fields := map[string]string{}
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, " ")
		if !ok {
			return c, fmt.Errorf("checkpoint line %q has no value", l)
		}
		fields[k] = v
	}
	var err error
	if c.Seq, err = strconv.ParseUint(fields["seq"], 10, 64); err != nil {
		return c, fmt.Errorf("checkpoint seq %q: %w", fields["seq"], err)
	}
	if c.Records, err = strconv.ParseUint(fields["records"], 10, 64); err != nil {
		return c, fmt.Errorf("checkpoint records %q: %w", fields["records"], err)
	}
	if c.Time, err = time.Parse(time.RFC3339, fields["time"]); err != nil {
		return c, fmt.Errorf("checkpoint time %q: %w", fields["time"], err)
	}
	c.Hash, c.KeyID = fields["hash"], fields["key"]
	if c.Payload() != payload {
		return c, fmt.Errorf("checkpoint is not in its canonical form")
	}
	return c, nil
}

// Signer signs checkpoints with an ed25519 key.
type Signer struct {
	key ed25519.PrivateKey
	id  string
}

// NewSigner reads a PEM "PRIVATE KEY" (PKCS #8) holding an ed25519 key,
// as `openssl genpkey -algorithm ed25519` writes it.
func NewSigner(pemBytes []byte) (*Signer, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("the checkpoint key is not a PEM PRIVATE KEY (make one with openssl genpkey -algorithm ed25519)")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("reading the checkpoint key: %w", err)
	}
	ed, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("the checkpoint key is a %T, not an ed25519 key", key)
	}
	id, err := KeyID(ed.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	return &Signer{key: ed, id: id}, nil
}

// KeyID is the id of a public key.
func (s *Signer) KeyID() string { return s.id }

// Keys is the signer's public key by its id, to check what it signed.
func (s *Signer) Keys() map[string]ed25519.PublicKey {
	return map[string]ed25519.PublicKey{s.id: s.key.Public().(ed25519.PublicKey)}
}

// Sign stamps c with the signer's key id and signs it.
func (s *Signer) Sign(c Checkpoint) SignedCheckpoint {
	c.KeyID = s.id
	payload := c.Payload()
	return SignedCheckpoint{Payload: payload, Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(s.key, []byte(payload)))}
}

// KeyID is the id of pub: the first 16 hex digits of the SHA-256 of its
// PKIX DER form (what `openssl pkey -pubout -outform DER` writes).
func KeyID(pub ed25519.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])[:16], nil
}

// ParsePublicKeys reads every PEM "PUBLIC KEY" holding an ed25519 key.
func ParsePublicKeys(pemBytes []byte) (map[string]ed25519.PublicKey, error) {
	keys := map[string]ed25519.PublicKey{}
	for rest := pemBytes; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "PUBLIC KEY" {
			continue
		}
		key, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("reading a checkpoint public key: %w", err)
		}
		ed, ok := key.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("a checkpoint public key is a %T, not an ed25519 key", key)
		}
		id, err := KeyID(ed)
		if err != nil {
			return nil, err
		}
		keys[id] = ed
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no PEM PUBLIC KEY found (openssl pkey -in key.pem -pubout writes one)")
	}
	return keys, nil
}

// The kinds of break checkpoints show.
const (
	// BreakCheckpoint is a checkpoint that does not match the log: another
	// hash at its record, a record it covers missing, or its signature
	// wrong for the key it names.
	BreakCheckpoint BreakKind = "checkpoint-mismatch"
	// BreakCheckpointUnverified is a checkpoint signed by a key the
	// auditor did not pass: its signature proves nothing (a warning).
	BreakCheckpointUnverified BreakKind = "checkpoint-unverified"
)

// StoredCheckpoint is a checkpoint and where it was read.
type StoredCheckpoint struct {
	Where string
	SignedCheckpoint
}

// CheckCheckpoints checks every checkpoint against the records the log
// holds (hashes by sequence number) and its signature against keys, the
// public keys the auditor holds (by id). A checkpoint whose key the
// auditor did not pass is a warning, never believed: keys the mirror or
// the cluster itself supplied would prove nothing.
func CheckCheckpoints(cps []StoredCheckpoint, hashes map[uint64]string, keys map[string]ed25519.PublicKey) (breaks, warnings []Break, verified int) {
	for _, cp := range cps {
		c, err := ParseCheckpoint(cp.Payload)
		if err != nil {
			breaks = append(breaks, Break{Kind: BreakCheckpoint, Name: cp.Where, Detail: err.Error()})
			continue
		}
		_, known := keys[c.KeyID]
		_, signed := cp.signedBy(keys)
		switch {
		case !known:
			warnings = append(warnings, Break{Kind: BreakCheckpointUnverified, Seq: c.Seq, Name: cp.Where,
				Detail: fmt.Sprintf("signed by key %s, which was not passed with --checkpoint-key: unverified", c.KeyID)})
		case !signed:
			breaks = append(breaks, Break{Kind: BreakCheckpoint, Seq: c.Seq, Name: cp.Where,
				Detail: fmt.Sprintf("the signature is not key %s's: the checkpoint was altered or forged", c.KeyID)})
			continue
		default:
			verified++
		}
		switch got, ok := hashes[c.Seq]; {
		case !ok:
			breaks = append(breaks, Break{Kind: BreakCheckpoint, Seq: c.Seq, Name: cp.Where,
				Detail: fmt.Sprintf("checkpoint of %s says record %d has hash %s; the log has no record %d", c.Time.Format(time.RFC3339), c.Seq, short(c.Hash), c.Seq)})
		case got != c.Hash:
			breaks = append(breaks, Break{Kind: BreakCheckpoint, Seq: c.Seq, Name: cp.Where,
				Detail: fmt.Sprintf("checkpoint of %s says record %d has hash %s; the log's has %s", c.Time.Format(time.RFC3339), c.Seq, short(c.Hash), short(got))})
		}
	}
	return breaks, warnings, verified
}

// signedBy is the checkpoint cp says, and whether a key of keys signed it.
func (cp SignedCheckpoint) signedBy(keys map[string]ed25519.PublicKey) (Checkpoint, bool) {
	c, err := ParseCheckpoint(cp.Payload)
	if err != nil {
		return c, false
	}
	key, known := keys[c.KeyID]
	sig, err := base64.StdEncoding.DecodeString(cp.Signature)
	return c, known && err == nil && ed25519.Verify(key, []byte(cp.Payload), sig)
}

// PutCheckpoint writes a signed checkpoint to the mirror, once.
func (m *Mirror) PutCheckpoint(ctx context.Context, seq uint64, cp SignedCheckpoint) error {
	body, err := CheckpointBody(cp)
	if err != nil {
		return err
	}
	return m.putOnce(ctx, m.CheckpointKey(seq), body, nil)
}

// Checkpoints reads every checkpoint in the mirror, each at its first
// version.
func (m *Mirror) Checkpoints(ctx context.Context) ([]StoredCheckpoint, error) {
	var out []StoredCheckpoint
	err := m.walkVersions(ctx, m.loc.Prefix+mirrorCheckpoints, func(o objectVersions) error {
		body, _, err := m.get(ctx, o.key, *o.versions[0].VersionId)
		if err != nil {
			return err
		}
		cp := StoredCheckpoint{Where: o.key}
		if err := json.Unmarshal(body, &cp.SignedCheckpoint); err != nil {
			cp.Payload = "unreadable: " + err.Error()
		}
		out = append(out, cp)
		return nil
	})
	return out, err
}

// CheckpointName is the ConfigMap name of the checkpoint at record seq
// in the cluster. It is not an audit record's name (kubectl-gitops-audit-*):
// checkpoints are the controller's, signed, and outside the chain.
func CheckpointName(seq uint64) string { return fmt.Sprintf("%s%010d", checkpointPrefix, seq) }

// checkpointLabel marks checkpoint ConfigMaps.
const checkpointLabel = KeyPrefix + "checkpoint"

// PutCheckpoint writes a signed checkpoint into the cluster as an
// immutable ConfigMap; one already there is left as it is.
func (s *ConfigMapStore) PutCheckpoint(ctx context.Context, seq uint64, cp SignedCheckpoint) error {
	immutable := true
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: CheckpointName(seq), Namespace: s.Namespace, Labels: map[string]string{checkpointLabel: "true"}},
		Data:       map[string]string{"payload": cp.Payload, "signature": cp.Signature},
		Immutable:  &immutable,
	}
	if cp.Timestamp != "" {
		cm.Data["timestamp"] = cp.Timestamp
	}
	_, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("writing checkpoint %s: %w", cm.Name, err)
	}
	return nil
}

// Checkpoints reads the checkpoints the cluster holds.
func (s *ConfigMapStore) Checkpoints(ctx context.Context) ([]StoredCheckpoint, error) {
	list, err := s.Client.CoreV1().ConfigMaps(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: checkpointLabel})
	if err != nil {
		return nil, fmt.Errorf("listing checkpoints in namespace %s: %w", s.Namespace, err)
	}
	var out []StoredCheckpoint
	for _, cm := range list.Items {
		if !strings.HasPrefix(cm.Name, checkpointPrefix) {
			// Only the controller writes these names (deploy/policy); a
			// record labelled as a checkpoint is someone else's.
			continue
		}
		out = append(out, StoredCheckpoint{Where: "configmap/" + cm.Name, SignedCheckpoint: SignedCheckpoint{Payload: cm.Data["payload"], Signature: cm.Data["signature"], Timestamp: cm.Data["timestamp"]}})
	}
	return out, nil
}
