package env

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// A Proxy serves the API server on loopback, authenticating every request
// as one user, so that a test can watch or hold what a real process sends.
// Kubeconfig reaches the API server through it. Close it when done.
type Proxy struct {
	*httptest.Server
	Kubeconfig string
}

// Proxy starts a Proxy as user. Each request goes to handle with forward,
// which sends it on (watches stream); a nil handle sends every request on.
func (e *Env) Proxy(user string, handle func(w http.ResponseWriter, r *http.Request, forward http.Handler)) (*Proxy, error) {
	config, err := e.RESTConfig(user)
	if err != nil {
		return nil, err
	}
	transport, err := rest.TransportFor(config)
	if err != nil {
		return nil, err
	}
	target, err := url.Parse(config.Host)
	if err != nil {
		return nil, err
	}
	forward := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     transport,
		FlushInterval: -1,
	}
	if handle == nil {
		handle = func(w http.ResponseWriter, r *http.Request, forward http.Handler) { forward.ServeHTTP(w, r) }
	}
	p := &Proxy{Server: httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handle(w, r, forward) }))}
	file, err := os.CreateTemp(e.Dir, "proxy-*.kubeconfig")
	if err != nil {
		p.Close()
		return nil, err
	}
	file.Close()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.URL}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	p.Kubeconfig = file.Name()
	if err := clientcmd.WriteToFile(*cfg, p.Kubeconfig); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}
