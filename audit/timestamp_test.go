package audit

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/digitorus/pkcs7"
	"github.com/digitorus/timestamp"
)

// testTSA is a timestamp authority for unit tests: a root, and a signing
// certificate for time stamping under it (the e2e tests run sigstore's).
type testTSA struct {
	root     *x509.Certificate
	rootKey  *ecdsa.PrivateKey
	leaf     *x509.Certificate
	leafKey  *ecdsa.PrivateKey
	requests int
}

func newTestTSA(t *testing.T) *testTSA {
	t.Helper()
	rootKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rootTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test TSA root"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	rootDER, err := x509.CreateCertificate(rand.Reader, rootTmpl, rootTmpl, &rootKey.PublicKey, rootKey)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := x509.ParseCertificate(rootDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "test TSA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageTimeStamping}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, root, &leafKey.PublicKey, rootKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(leafDER)
	return &testTSA{root: root, rootKey: rootKey, leaf: leaf, leafKey: leafKey}
}

// respond answers an RFC 3161 request.
func (a *testTSA) respond(t *testing.T, req []byte) []byte {
	t.Helper()
	a.requests++
	r, err := timestamp.ParseRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	ts := timestamp.Timestamp{HashAlgorithm: r.HashAlgorithm, HashedMessage: r.HashedMessage, Time: time.Now(), Policy: asn1.ObjectIdentifier{1, 2, 3}, AddTSACertificate: r.Certificates}
	resp, err := ts.CreateResponseWithOpts(a.leaf, a.leafKey, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func (a *testTSA) trust(t *testing.T) *TSATrust {
	t.Helper()
	trust, err := ParseTSATrust(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.root.Raw}))
	if err != nil {
		t.Fatal(err)
	}
	return trust
}

// TestTimestampsProveTheirCheckpoint: the client asks a timestamp
// authority over HTTP (the RFC 3161 media types) for a token over the
// checkpoint; the token holds for that checkpoint alone, chains to the
// authority's root, and a checkpoint whose token was swapped or altered
// is a break.
func TestTimestampsProveTheirCheckpoint(t *testing.T) {
	authority := newTestTSA(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/timestamp-query" {
			t.Errorf("request %s %s %q", r.Method, r.URL, r.Header.Get("Content-Type"))
			http.Error(w, "unknown", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/timestamp-reply")
		w.Write(authority.respond(t, body))
	}))
	defer srv.Close()
	signer, keys := newTestSigner(t)
	first := signer.Sign(Checkpoint{Seq: 4, Hash: strings.Repeat("a", 64), Records: 4, Time: time.Now().UTC()})
	second := signer.Sign(Checkpoint{Seq: 9, Hash: strings.Repeat("b", 64), Records: 9, Time: time.Now().UTC()})
	tsa := &TSA{URL: srv.URL + "/api/v1/timestamp"}
	for _, cp := range []*SignedCheckpoint{&first, &second} {
		token, err := tsa.Timestamp(context.Background(), []byte(cp.Payload))
		if err != nil {
			t.Fatal(err)
		}
		cp.Timestamp = base64.StdEncoding.EncodeToString(token)
	}
	stored := func(cps ...SignedCheckpoint) []StoredCheckpoint {
		var out []StoredCheckpoint
		for i, cp := range cps {
			out = append(out, StoredCheckpoint{Where: string(rune('a' + i)), SignedCheckpoint: cp})
		}
		return out
	}
	if breaks, warnings, stamped := CheckTimestamps(stored(first, second), keys, authority.trust(t)); len(breaks)+len(warnings) != 0 || stamped != 2 {
		t.Errorf("two good timestamps: %v %v %d", breaks, warnings, stamped)
	}
	if breaks, warnings, stamped := CheckTimestamps(stored(first), keys, nil); len(breaks) != 0 || len(warnings) != 1 || stamped != 0 || !strings.Contains(warnings[0].Detail, "not checked against --tsa-certs") {
		t.Errorf("no roots: %v %v %d", breaks, warnings, stamped)
	}
	swapped := first
	swapped.Timestamp = second.Timestamp
	if breaks, _, _ := CheckTimestamps(stored(swapped), keys, authority.trust(t)); len(breaks) != 1 || !strings.Contains(breaks[0].Detail, "covers another text") {
		t.Errorf("a token moved to another checkpoint: %v", breaks)
	}
	flipped, _ := base64.StdEncoding.DecodeString(first.Timestamp)
	flipped[len(flipped)-10] ^= 0xff
	altered := first
	altered.Timestamp = base64.StdEncoding.EncodeToString(flipped)
	if breaks, _, _ := CheckTimestamps(stored(altered), keys, authority.trust(t)); len(breaks) != 1 {
		t.Errorf("an altered token: %v", breaks)
	}
	other := newTestTSA(t)
	if breaks, _, _ := CheckTimestamps(stored(first), keys, other.trust(t)); len(breaks) != 1 || !strings.Contains(breaks[0].Detail, "not a timestamp authority of --tsa-certs") {
		t.Errorf("a token of an authority not trusted: %v", breaks)
	}
	// Counted once per checkpoint, however many copies say so, and only
	// for a checkpoint signed by a key passed.
	if _, _, stamped := CheckTimestamps(stored(first, first, second), keys, authority.trust(t)); stamped != 2 {
		t.Errorf("two checkpoints, one of them twice: %d stamped", stamped)
	}
	if _, _, stamped := CheckTimestamps(stored(first), nil, authority.trust(t)); stamped != 0 {
		t.Errorf("a checkpoint no key passed signed: %d stamped", stamped)
	}
	// With --tsa-certs, a signed checkpoint without a token is said.
	bare := first
	bare.Timestamp = ""
	if _, warnings, _ := CheckTimestamps(stored(bare), keys, authority.trust(t)); len(warnings) != 1 || !strings.Contains(warnings[0].Detail, "not timestamped") {
		t.Errorf("a checkpoint with no token: %v", warnings)
	}
	// Back-dated: the key holder signs a checkpoint dated a day ago and
	// has it stamped now.
	old := signer.Sign(Checkpoint{Seq: 2, Hash: strings.Repeat("c", 64), Records: 2, Time: time.Now().Add(-24 * time.Hour).UTC()})
	token, err := tsa.Timestamp(context.Background(), []byte(old.Payload))
	if err != nil {
		t.Fatal(err)
	}
	old.Timestamp = base64.StdEncoding.EncodeToString(token)
	if breaks, _, _ := CheckTimestamps(stored(old), keys, authority.trust(t)); len(breaks) != 1 || !strings.Contains(breaks[0].Detail, "it was not made when it says") {
		t.Errorf("a back-dated checkpoint: %v", breaks)
	}
	// A forger signs a genuine token's content with a key of their own
	// and carries the authority's certificate beside theirs: the signer is
	// judged, not the certificate that would chain.
	genuine, _ := base64.StdEncoding.DecodeString(first.Timestamp)
	p7, err := pkcs7.Parse(genuine)
	if err != nil {
		t.Fatal(err)
	}
	for _, withEKU := range []bool{false, true} {
		forger := newTestTSA(t)
		cert := forger.leaf
		if !withEKU {
			cert = forger.root
		}
		key := forger.leafKey
		if !withEKU {
			key = nil
		}
		sd, err := pkcs7.NewSignedData(p7.Content)
		if err != nil {
			t.Fatal(err)
		}
		sd.SetContentType(asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 16, 1, 4})
		if withEKU {
			err = sd.AddSigner(cert, key, pkcs7.SignerInfoConfig{})
		} else {
			err = sd.AddSigner(cert, forger.rootKey, pkcs7.SignerInfoConfig{})
		}
		if err != nil {
			t.Fatal(err)
		}
		sd.AddCertificate(authority.leaf)
		forged, err := sd.Finish()
		if err != nil {
			t.Fatal(err)
		}
		cp := first
		cp.Timestamp = base64.StdEncoding.EncodeToString(forged)
		if breaks, _, stamped := CheckTimestamps(stored(cp), keys, authority.trust(t)); len(breaks) != 1 || stamped != 0 {
			t.Errorf("a token signed by a forger (timestamping EKU %v) beside the authority's certificate: %v, %d stamped", withEKU, breaks, stamped)
		}
	}
	if authority.requests != 3 {
		t.Errorf("the authority was asked %d times, want 2", authority.requests)
	}
	if _, err := (&TSA{URL: srv.URL + "/nowhere", Client: &http.Client{Timeout: time.Nanosecond}}).Timestamp(context.Background(), []byte("x")); err == nil {
		t.Error("a timestamp authority that does not answer: no error")
	}
	if _, _, err := CheckTimestamp([]byte("not a token"), []byte(first.Payload), nil); !errors.Is(err, ErrTimestamp) {
		t.Errorf("garbage: %v", err)
	}
}
