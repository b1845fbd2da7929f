package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestDigestKeyIsHMACSHA256: the keyed digest is RFC 4231's HMAC-SHA256
// (its test case 2), which `openssl dgst -sha256 -hmac KEY` computes, and it
// cannot be recomputed from the raw patch alone, as the plain SHA-256 the
// records kept before could.
func TestDigestKeyIsHMACSHA256(t *testing.T) {
	k := NewDigestKey("1", []byte("Jefe"))
	if got := k.MAC([]byte("what do ya want for nothing?")); got != "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843" {
		t.Errorf("HMAC %s", got)
	}
	raw := []byte(`{"data":{"password":"hunter2"}}`)
	plain := sha256.Sum256(raw)
	if mac := k.MAC(raw); mac == hex.EncodeToString(plain[:]) || mac == NewDigestKey("1", []byte("other-key-16-bytes")).MAC(raw) {
		t.Errorf("the digest does not depend on the key")
	}
}

func TestDigestKeyFromTheSecret(t *testing.T) {
	ctx := context.Background()
	store := NewConfigMapStore(fake.NewSimpleClientset(), "argocd")
	if k, err := store.DigestKey(ctx); k != nil || err != nil {
		t.Fatalf("no secret: %v %v", k, err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: DigestKeySecret, Namespace: "argocd"},
		Data: map[string][]byte{"id": []byte("2"), "key.1": []byte("an-old-key-of-32-bytes-000000000"), "key.2": []byte("the-current-key-of-32-bytes-0000")}}
	store = NewConfigMapStore(fake.NewSimpleClientset(secret), "argocd")
	k, err := store.DigestKey(ctx)
	if err != nil || k.ID != "2" || k.MAC(nil) != NewDigestKey("2", []byte("the-current-key-of-32-bytes-0000")).MAC(nil) {
		t.Errorf("current key: %+v %v", k, err)
	}
	secret.Data["id"] = []byte("3")
	if _, err := NewConfigMapStore(fake.NewSimpleClientset(secret), "argocd").DigestKey(ctx); err == nil {
		t.Errorf("an id without its key was accepted")
	}
}
