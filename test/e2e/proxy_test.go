//go:build e2e

package e2e

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// tripProxy stands between the plugin and the API server, authenticating
// as one user, and trips on the first request whose method and path match:
// that request goes through, and every later one is held (until release)
// or has its connection dropped. It lets a test interrupt a real process at
// an exact step.
type tripProxy struct {
	srv      *httptest.Server
	tripped  chan struct{}
	release  chan struct{}
	once     sync.Once
	relOnce  sync.Once
	kubeconf string
}

func newTripProxy(t *testing.T, user, method, pathSuffix string, drop bool) *tripProxy {
	t.Helper()
	config, err := testEnv.RESTConfig(user)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(config)
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(config.Host)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = transport
	p := &tripProxy{tripped: make(chan struct{}), release: make(chan struct{})}
	var mu sync.Mutex
	done := false
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		proxy.ServeHTTP(w, r)
		if trips {
			mu.Lock()
			done = true
			mu.Unlock()
			p.once.Do(func() { close(p.tripped) })
		}
	}))
	t.Cleanup(func() {
		p.Release()
		p.srv.Close()
	})
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.srv.URL}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	p.kubeconf = filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p.kubeconf); err != nil {
		t.Fatal(err)
	}
	return p
}

// Release lets held requests through.
func (p *tripProxy) Release() { p.relOnce.Do(func() { close(p.release) }) }

// env runs the plugin through the proxy.
func (p *tripProxy) env() []string {
	return []string{"HOME=" + os.TempDir(), "KUBECONFIG=" + p.kubeconf, "PATH=" + binDir + string(os.PathListSeparator) + os.Getenv("PATH"), "NO_COLOR=1"}
}
