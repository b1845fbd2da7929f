package audit

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"
)

func newTestSigner(t *testing.T) (*Signer, map[string]ed25519.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ParsePublicKeys(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := keys[s.KeyID()]; !ok {
		t.Fatalf("the public key's id is not the signer's %s: %v", s.KeyID(), keys)
	}
	return s, keys
}

func TestCheckpointPayloadRoundTrips(t *testing.T) {
	c := Checkpoint{Seq: 42, Hash: strings.Repeat("ab", 32), Records: 42, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), KeyID: "0123456789abcdef"}
	got, err := ParseCheckpoint(c.Payload())
	if err != nil || got != c {
		t.Fatalf("ParseCheckpoint(%q) = %+v, %v", c.Payload(), got, err)
	}
	for _, bad := range []string{"", "kubectl-gitops checkpoint v1\n", strings.Replace(c.Payload(), "seq 42", "seq 042", 1), c.Payload() + "extra 1\n"} {
		if _, err := ParseCheckpoint(bad); err == nil {
			t.Errorf("ParseCheckpoint(%q) accepted it", bad)
		}
	}
}

// TestCheckCheckpoints: a checkpoint is believed only with the auditor's
// key; one that names another hash, a record the log lacks, or whose
// payload was edited after signing is a break; one signed by a key the
// auditor did not pass is only unverified, whatever it says.
func TestCheckCheckpoints(t *testing.T) {
	signer, keys := newTestSigner(t)
	stranger, _ := newTestSigner(t)
	hashes := map[uint64]string{1: "h1", 2: "h2"}
	good := signer.Sign(Checkpoint{Seq: 2, Hash: "h2", Records: 2, Time: time.Now()})
	edited := good
	edited.Payload = strings.Replace(good.Payload, "hash h2", "hash h1", 1)
	cases := []struct {
		name                string
		cp                  SignedCheckpoint
		breaks, warnings, v int
		detail              string
	}{
		{"good", good, 0, 0, 1, ""},
		{"another hash", signer.Sign(Checkpoint{Seq: 1, Hash: "h9", Records: 1, Time: time.Now()}), 1, 0, 1, "the log's has h1"},
		{"a record the log lacks", signer.Sign(Checkpoint{Seq: 3, Hash: "h3", Records: 3, Time: time.Now()}), 1, 0, 1, "the log has no record 3"},
		{"edited after signing", edited, 1, 0, 0, "altered or forged"},
		{"another key", stranger.Sign(Checkpoint{Seq: 2, Hash: "h2", Records: 2, Time: time.Now()}), 0, 1, 0, "unverified"},
		{"unreadable", SignedCheckpoint{Payload: "nonsense"}, 1, 0, 0, "not a kubectl-gitops checkpoint"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			breaks, warnings, verified := CheckCheckpoints([]StoredCheckpoint{{Where: "cp", SignedCheckpoint: tc.cp}}, hashes, keys)
			if len(breaks) != tc.breaks || len(warnings) != tc.warnings || verified != tc.v {
				t.Fatalf("breaks %v, warnings %v, verified %d", breaks, warnings, verified)
			}
			all := append(breaks, warnings...)
			if tc.detail != "" && !strings.Contains(all[0].Detail, tc.detail) {
				t.Errorf("%q does not say %q", all[0].Detail, tc.detail)
			}
		})
	}
}

func TestParseMirrorURL(t *testing.T) {
	for raw, want := range map[string]MirrorLocation{
		"s3://bucket":      {Bucket: "bucket"},
		"s3://bucket/":     {Bucket: "bucket"},
		"s3://bucket/prod": {Bucket: "bucket", Prefix: "prod/"},
		"s3://bucket/a/b/": {Bucket: "bucket", Prefix: "a/b/"},
	} {
		if got, err := ParseMirrorURL(raw); err != nil || got != want {
			t.Errorf("ParseMirrorURL(%q) = %+v, %v; want %+v", raw, got, err, want)
		}
	}
	for _, bad := range []string{"bucket/prod", "https://bucket/prod", "s3:///prod", "s3://key:secret@bucket/prod", "s3://bucket/prod?x=1"} {
		if _, err := ParseMirrorURL(bad); err == nil {
			t.Errorf("ParseMirrorURL(%q) accepted it", bad)
		}
	}
}
