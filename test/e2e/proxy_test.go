//go:build e2e

package e2e

import (
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// tripProxy stands between the plugin and the API server, authenticating
// as one user, and trips on the first request whose method and path match:
// that request goes through, and every later one is held (until release)
// or has its connection dropped. It lets a test interrupt a real process at
// an exact step.
type tripProxy struct {
	*env.Proxy
	tripped chan struct{}
	release chan struct{}
	once    sync.Once
	relOnce sync.Once
}

func newTripProxy(t *testing.T, user, method, pathSuffix string, drop bool) *tripProxy {
	t.Helper()
	p := &tripProxy{tripped: make(chan struct{}), release: make(chan struct{})}
	var mu sync.Mutex
	done := false
	proxy, err := testEnv.Proxy(user, func(w http.ResponseWriter, r *http.Request, forward http.Handler) {
		mu.Lock()
		after := done
		trips := !done && r.Method == method && strings.HasSuffix(r.URL.Path, pathSuffix)
		mu.Unlock()
		if after {
			if drop {
				if hj, ok := w.(http.Hijacker); ok {
					if conn, _, err := hj.Hijack(); err == nil {
						conn.Close()
						return
					}
				}
			}
			<-p.release
		}
		forward.ServeHTTP(w, r)
		if trips {
			mu.Lock()
			done = true
			mu.Unlock()
			p.once.Do(func() { close(p.tripped) })
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	p.Proxy = proxy
	t.Cleanup(func() {
		p.Release()
		p.Close()
	})
	return p
}

// Release lets held requests through.
func (p *tripProxy) Release() { p.relOnce.Do(func() { close(p.release) }) }

// env runs the plugin through the proxy.
func (p *tripProxy) env() []string {
	return []string{"HOME=" + os.TempDir(), "KUBECONFIG=" + p.Kubeconfig, "PATH=" + binDir + string(os.PathListSeparator) + os.Getenv("PATH"), "NO_COLOR=1"}
}
