package audit

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/digitorus/pkcs7"
	"github.com/digitorus/timestamp"
)

// TSA is an RFC 3161 timestamp authority, asked over HTTP to timestamp a
// checkpoint: the token it signs proves the checkpoint existed at that
// time, on the word of someone other than the cluster and its operators.
type TSA struct {
	URL    string
	Client *http.Client
}

// Timestamp asks the authority for a token over payload's SHA-256, with
// its signing certificate, and returns the token (DER) once it is checked
// to cover payload.
func (t *TSA) Timestamp(ctx context.Context, payload []byte) ([]byte, error) {
	req, err := timestamp.CreateRequest(bytes.NewReader(payload), &timestamp.RequestOptions{Hash: crypto.SHA256, Certificates: true})
	if err != nil {
		return nil, err
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(req))
	if err != nil {
		return nil, err
	}
	httpReq.Header.Set("Content-Type", "application/timestamp-query")
	client := t.Client
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := client.Do(httpReq)
	if err != nil {
		return nil, fmt.Errorf("asking timestamp authority %s: %w", t.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return nil, fmt.Errorf("timestamp authority %s answered %s", t.URL, resp.Status)
	}
	ts, err := timestamp.ParseResponse(body)
	if err != nil {
		return nil, fmt.Errorf("timestamp authority %s: %w", t.URL, err)
	}
	if _, _, err := CheckTimestamp(ts.RawToken, payload, nil); err != nil {
		return nil, fmt.Errorf("timestamp authority %s: %w", t.URL, err)
	}
	return ts.RawToken, nil
}

// ErrTimestamp is a timestamp token that does not prove what it claims.
var ErrTimestamp = errors.New("timestamp does not hold")

// TSATrust is what an auditor trusts of timestamp authorities: roots, and
// the intermediates that link a token's signer to them (a token may carry
// its signer alone).
type TSATrust struct {
	Roots, Intermediates *x509.CertPool
}

// ParseTSATrust reads PEM certificates: the self-signed ones are roots,
// the others intermediates.
func ParseTSATrust(pemBytes []byte) (*TSATrust, error) {
	trust := &TSATrust{Roots: x509.NewCertPool(), Intermediates: x509.NewCertPool()}
	roots := 0
	for rest := pemBytes; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		if bytes.Equal(c.RawSubject, c.RawIssuer) && c.CheckSignature(c.SignatureAlgorithm, c.RawTBSCertificate, c.Signature) == nil {
			trust.Roots.AddCert(c)
			roots++
		} else {
			trust.Intermediates.AddCert(c)
		}
	}
	if roots == 0 {
		return nil, errors.New("no self-signed (root) certificate in it")
	}
	return trust, nil
}

// CheckTimestamp checks a token (DER) against payload: it is signed by the
// certificate it carries, over payload's digest. With trust it also
// checks that certificate chains to one of its roots for time stamping, as
// of the time it states; without, who signed it is not established. It
// returns the time the token states and its signer's subject.
func CheckTimestamp(token, payload []byte, trust *TSATrust) (time.Time, string, error) {
	ts, err := timestamp.Parse(token) // checks the signature by the certificate it names
	if err != nil {
		return time.Time{}, "", fmt.Errorf("%w: %v", ErrTimestamp, err)
	}
	if ts.HashAlgorithm != crypto.SHA256 {
		return time.Time{}, "", fmt.Errorf("%w: it covers a %s digest, not SHA-256", ErrTimestamp, ts.HashAlgorithm)
	}
	sum := sha256.Sum256(payload)
	if !bytes.Equal(ts.HashedMessage, sum[:]) {
		return time.Time{}, "", fmt.Errorf("%w: it covers another text than this checkpoint", ErrTimestamp)
	}
	// The certificate judged is the one that signed: the token may carry
	// others, a genuine authority's among them, to stand beside a forger's.
	p7, err := pkcs7.Parse(token)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("%w: %v", ErrTimestamp, err)
	}
	signer := p7.GetOnlySigner()
	if signer == nil {
		return time.Time{}, "", fmt.Errorf("%w: it must have exactly one signer, whose certificate it carries", ErrTimestamp)
	}
	if !slices.Contains(signer.ExtKeyUsage, x509.ExtKeyUsageTimeStamping) {
		return time.Time{}, "", fmt.Errorf("%w: its signer %q is not certified for time stamping", ErrTimestamp, signer.Subject.String())
	}
	if trust != nil {
		intermediates := trust.Intermediates.Clone()
		for _, c := range p7.Certificates {
			intermediates.AddCert(c)
		}
		if err := p7.VerifyWithOpts(x509.VerifyOptions{Roots: trust.Roots, Intermediates: intermediates, CurrentTime: ts.Time,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageTimeStamping}}); err != nil {
			return time.Time{}, "", fmt.Errorf("%w: its signer %q is not a timestamp authority of --tsa-certs: %v", ErrTimestamp, signer.Subject.String(), err)
		}
	}
	return ts.Time, signer.Subject.String(), nil
}

// timestampSkew is how far a checkpoint's own time may be from the time
// its authority stamped it: the controller asks right after signing.
const timestampSkew = 5 * time.Minute

// CheckTimestamps checks the timestamp of every checkpoint that has one
// (CheckTimestamp, against trust when given): a token that does not cover
// its checkpoint, or stamps it at another time than the checkpoint says,
// is a break; one whose signer could not be established (no trust) a
// warning, and so, with trust, is a signed checkpoint with no token. It
// returns how many checkpoints, signed by a key of keys, hold a token of
// a trusted authority (each once, whichever copies say so).
func CheckTimestamps(cps []StoredCheckpoint, keys map[string]ed25519.PublicKey, trust *TSATrust) (breaks, warnings []Break, stamped int) {
	counted := map[uint64]bool{}
	for _, cp := range cps {
		c, signed := cp.signedBy(keys)
		if cp.Timestamp == "" {
			if trust != nil && signed {
				warnings = append(warnings, Break{Kind: BreakCheckpointUnverified, Seq: c.Seq, Name: cp.Where, Detail: "not timestamped: the controller had no --tsa, or its authority did not answer"})
			}
			continue
		}
		token, err := base64.StdEncoding.DecodeString(cp.Timestamp)
		if err != nil {
			breaks = append(breaks, Break{Kind: BreakCheckpoint, Seq: c.Seq, Name: cp.Where, Detail: "the timestamp is not base64: " + err.Error()})
			continue
		}
		at, signer, err := CheckTimestamp(token, []byte(cp.Payload), trust)
		switch {
		case err != nil:
			breaks = append(breaks, Break{Kind: BreakCheckpoint, Seq: c.Seq, Name: cp.Where, Detail: err.Error()})
		case at.Before(c.Time.Add(-timestampSkew)) || at.After(c.Time.Add(timestampSkew)):
			breaks = append(breaks, Break{Kind: BreakCheckpoint, Seq: c.Seq, Name: cp.Where,
				Detail: fmt.Sprintf("%v: the checkpoint says %s, its authority stamped it %s: it was not made when it says", ErrTimestamp, c.Time.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339))})
		case trust == nil:
			warnings = append(warnings, Break{Kind: BreakCheckpointUnverified, Seq: c.Seq, Name: cp.Where,
				Detail: fmt.Sprintf("timestamped %s by %q, which was not checked against --tsa-certs: unverified", at.UTC().Format(time.RFC3339), signer)})
		case signed && !counted[c.Seq]:
			counted[c.Seq] = true
			stamped++
		}
	}
	return breaks, warnings, stamped
}
