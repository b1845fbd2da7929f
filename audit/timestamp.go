package audit

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

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
		if c.CheckSignatureFrom(c) == nil {
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
	ts, err := timestamp.Parse(token) // checks the signature by the certificates it carries
	if err != nil {
		return time.Time{}, "", fmt.Errorf("%w: %v", ErrTimestamp, err)
	}
	if len(ts.Certificates) == 0 {
		return time.Time{}, "", fmt.Errorf("%w: it carries no signing certificate, so its signature cannot be checked", ErrTimestamp)
	}
	if ts.HashAlgorithm != crypto.SHA256 {
		return time.Time{}, "", fmt.Errorf("%w: it covers a %s digest, not SHA-256", ErrTimestamp, ts.HashAlgorithm)
	}
	sum := sha256.Sum256(payload)
	if !bytes.Equal(ts.HashedMessage, sum[:]) {
		return time.Time{}, "", fmt.Errorf("%w: it covers another text than this checkpoint", ErrTimestamp)
	}
	signer := ts.Certificates[0]
	for _, c := range ts.Certificates {
		for _, u := range c.ExtKeyUsage {
			if u == x509.ExtKeyUsageTimeStamping {
				signer = c
			}
		}
	}
	if trust != nil {
		intermediates := x509.NewCertPool()
		if trust.Intermediates != nil {
			intermediates = trust.Intermediates.Clone()
		}
		for _, c := range ts.Certificates {
			intermediates.AddCert(c)
		}
		if _, err := signer.Verify(x509.VerifyOptions{Roots: trust.Roots, Intermediates: intermediates, CurrentTime: ts.Time,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageTimeStamping}}); err != nil {
			return time.Time{}, "", fmt.Errorf("%w: its signer %q is not a timestamp authority of --tsa-certs: %v", ErrTimestamp, signer.Subject.String(), err)
		}
	}
	return ts.Time, signer.Subject.String(), nil
}

// CheckTimestamps checks the timestamp of every checkpoint that has one
// (CheckTimestamp, against trust when given): a token that does not cover
// its checkpoint is a break; one whose signer could not be established
// (no trust) a warning. It returns how many hold.
func CheckTimestamps(cps []StoredCheckpoint, trust *TSATrust) (breaks, warnings []Break, stamped int) {
	for _, cp := range cps {
		if cp.Timestamp == "" {
			continue
		}
		c, _ := ParseCheckpoint(cp.Payload)
		token, err := base64.StdEncoding.DecodeString(cp.Timestamp)
		if err != nil {
			breaks = append(breaks, Break{Kind: BreakCheckpoint, Seq: c.Seq, Name: cp.Where, Detail: "the timestamp is not base64: " + err.Error()})
			continue
		}
		at, signer, err := CheckTimestamp(token, []byte(cp.Payload), trust)
		switch {
		case err != nil:
			breaks = append(breaks, Break{Kind: BreakCheckpoint, Seq: c.Seq, Name: cp.Where, Detail: err.Error()})
		case trust == nil:
			warnings = append(warnings, Break{Kind: BreakCheckpointUnverified, Seq: c.Seq, Name: cp.Where,
				Detail: fmt.Sprintf("timestamped %s by %q, which was not checked against --tsa-certs: unverified", at.UTC().Format(time.RFC3339), signer)})
		default:
			stamped++
		}
	}
	return breaks, warnings, stamped
}
