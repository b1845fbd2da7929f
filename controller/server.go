package controller

import (
	"fmt"
	"net"
	"net/http"
	"time"
)

// Handler serves the controller's endpoints: /metrics, /healthz (the
// process is up) and /readyz (standing by, or leading with its cache
// synced).
func (c *Controller) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", c.Metrics)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !c.Metrics.Leader() {
			fmt.Fprintln(w, "ok: standing by")
			return
		}
		select {
		case <-c.Ready():
			fmt.Fprintln(w, "ok: leading")
		default:
			http.Error(w, "leading, cache not synced yet", http.StatusServiceUnavailable)
		}
	})
	return mux
}

// Serve serves Handler on listener until the returned stop is called.
func (c *Controller) Serve(listener net.Listener) (stop func()) {
	server := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = server.Serve(listener) }()
	c.logf("serving /metrics, /healthz and /readyz on %s", listener.Addr())
	return func() { _ = server.Close() }
}
