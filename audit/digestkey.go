package audit

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DigestKeySecret is the Secret, in the audit log's namespace, holding the
// per-installation key of the records' keyed digests: data "id" names the
// current key, "key.ID" holds it (keys of earlier ids stay, so old records
// can still be checked). The install creates it; the break-glass and
// auditor roles may read it, and readers of the audit ConfigMaps or of Jira
// may not, so a record's digest of a raw patch cannot be recomputed from a
// guess by whoever reads the record.
const DigestKeySecret = "kubectl-gitops-digest-key"

// DigestKey is one key of the keyed digests.
type DigestKey struct {
	ID  string
	key []byte
}

// NewDigestKey is the key id with the given bytes.
func NewDigestKey(id string, key []byte) *DigestKey { return &DigestKey{ID: id, key: key} }

// MAC is the hex HMAC-SHA256 of raw under the key, as
// `openssl dgst -sha256 -hmac KEY` prints it.
func (k *DigestKey) MAC(raw []byte) string {
	m := hmac.New(sha256.New, k.key)
	m.Write(raw)
	return hex.EncodeToString(m.Sum(nil))
}

// DigestKey reads the current key of the store's namespace; nil (and no
// error) when the install did not create one.
func (s *ConfigMapStore) DigestKey(ctx context.Context) (*DigestKey, error) {
	secret, err := s.Client.CoreV1().Secrets(s.Namespace).Get(ctx, DigestKeySecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the digest key (secret %s/%s): %w", s.Namespace, DigestKeySecret, err)
	}
	id := string(secret.Data["id"])
	key := secret.Data["key."+id]
	if id == "" || len(key) < 16 {
		return nil, fmt.Errorf("the digest key secret %s/%s has no key.%s of at least 16 bytes for its id %q", s.Namespace, DigestKeySecret, id, id)
	}
	return &DigestKey{ID: id, key: key}, nil
}
