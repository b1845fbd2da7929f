package env

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// TSA is an RFC 3161 timestamp authority on loopback: sigstore's
// timestamp-authority (hack/tools/tsa), the server sigstore runs in
// production, with its in-memory signer (a key and certificate chain made
// at start, for tests). Chosen because it is a Go module that builds here
// and speaks plain RFC 3161 over HTTP, as public authorities do.
type TSA struct {
	// URL is where timestamp requests are posted.
	URL string
	// Chain is its certificate chain, leaf first, as PEM: what an auditor
	// passes to audit verify --tsa-certs.
	Chain []byte
}

var tsaOnce sync.Mutex

// TSA starts the environment's timestamp authority the first time a test
// asks for it (building it once into the tools cache); it stops with the
// environment.
func (e *Env) TSA(ctx context.Context) (*TSA, error) {
	tsaOnce.Lock()
	defer tsaOnce.Unlock()
	if e.tsa != nil {
		return e.tsa, nil
	}
	dir, err := buildTools("tsa", "timestamp-server=github.com/sigstore/timestamp-authority/v2/cmd/timestamp-server")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	// No NTP: the environment has no internet, and its clock is the
	// machine's.
	p, err := e.start("timestamp-server", nil, filepath.Join(dir, "timestamp-server"), "serve", "--host", "127.0.0.1", "--port", strconv.Itoa(ports[0]),
		"--timestamp-signer", "memory", "--disable-ntp-monitoring", "--log-type", "prod")
	if err != nil {
		return nil, err
	}
	if err := p.waitFor(ctx, 30*time.Second, tcpReady(addr)); err != nil {
		return nil, err
	}
	base := "http://" + addr + "/api/v1/timestamp"
	resp, err := http.Get(base + "/certchain")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	chain, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if block, _ := pem.Decode(chain); resp.StatusCode != http.StatusOK || block == nil {
		return nil, fmt.Errorf("timestamp authority's certificate chain: %s %q", resp.Status, chain)
	}
	e.tsa = &TSA{URL: base, Chain: chain}
	return e.tsa, nil
}
