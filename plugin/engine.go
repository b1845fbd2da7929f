package plugin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/ticket"
)

// Factory is what every command is built from, as kubectl's
// cmdutil.Factory is: the kubeconfig flags, the streams, and how a
// command's engine is built from its flags. Tests build whole commands
// over fake clients by giving their own newEngine (plugin/fake_test.go).
type Factory struct {
	configFlags *genericclioptions.ConfigFlags
	streams     genericiooptions.IOStreams
	newEngine   func(*engineFlags) (*breakglass.Engine, error)
}

// NewFactory builds commands that reach the cluster the kubeconfig flags
// name.
func NewFactory(streams genericiooptions.IOStreams) *Factory {
	return &Factory{configFlags: genericclioptions.NewConfigFlags(true), streams: streams, newEngine: (*engineFlags).clusterEngine}
}

// engineFlags are the flags every command that drives the engine shares.
type engineFlags struct {
	*Factory
	AppNamespace   string
	AuditNamespace string
	ArgoNamespace  string
	// ArgoContext picks a context of the argocd CLI's configuration.
	ArgoContext string
}

// addAppNamespace registers --app-namespace, for the commands that name
// or list Applications.
func (f *engineFlags) addAppNamespace(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.AppNamespace, "app-namespace", "argocd", "namespace where Applications live")
}

// addEngineFlags registers what every command driving the engine reads:
// --audit-namespace, --argocd-namespace and --argocd-context. The audit
// log stays in one namespace whatever --app-namespace says: with Argo CD's
// apps-in-any-namespace, Applications live where app teams may be able to
// delete ConfigMaps.
func (f *engineFlags) addEngineFlags(cmd *cobra.Command) {
	f.addAuditNamespace(cmd)
	cmd.Flags().StringVar(&f.ArgoNamespace, "argocd-namespace", "argocd", "namespace Argo CD runs in: argocd-cm (resource tracking, installationID) is read there, whatever --app-namespace says")
	cmd.Flags().StringVar(&f.ArgoContext, "argocd-context", "", "context of the argocd CLI's configuration (argocd login) to reach the Argo CD API server with, when ARGOCD_SERVER is not set (default: its current context)")
}

// addAuditNamespace registers --audit-namespace alone, for the commands
// that drive the engine only to write the audit log.
func (f *engineFlags) addAuditNamespace(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.AuditNamespace, "audit-namespace", "argocd", "namespace holding the audit log (Argo CD's own)")
}

// kubeClient builds a Kubernetes client from the kubeconfig flags.
func kubeClient(flags *genericclioptions.ConfigFlags) (*rest.Config, kubernetes.Interface, error) {
	config, err := flags.ToRESTConfig()
	if err != nil {
		return nil, nil, err
	}
	if os.Getenv("KUBECTL_GITOPS_TRACE") != "" {
		config.Wrap(traceRequests(os.Stderr, time.Now()))
	}
	kube, err := kubernetes.NewForConfig(withClientRates(config))
	return config, kube, err
}

// traceRequests, with KUBECTL_GITOPS_TRACE set, prints each API request
// as it ends: when it started (since the process began its work), how
// long it took, its method, path and status. For finding where a
// command's time goes (make bench's T_live), as kubectl's -v=6 does.
func traceRequests(w io.Writer, start time.Time) transport.WrapperFunc {
	var mu sync.Mutex
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			began := time.Now()
			resp, err := rt.RoundTrip(r)
			status := "error"
			if err == nil {
				status = resp.Status
			}
			mu.Lock()
			fmt.Fprintf(w, "trace: +%4dms %4dms %s %s %s\n", began.Sub(start).Milliseconds(), time.Since(began).Milliseconds(), r.Method, r.URL.RequestURI(), status)
			mu.Unlock()
			return resp, err
		})
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// withClientRates lifts client-go's default client-side limit (5 requests
// a second after a burst of 10) to kubectl's (50, burst 300), unless the
// config sets its own. A break-glass sends a few dozen requests: under the
// default, everything after the tenth waited 200 ms for its turn, the
// emergency patch included.
func withClientRates(config *rest.Config) *rest.Config {
	if config.QPS == 0 {
		config.QPS = 50
	}
	if config.Burst == 0 {
		config.Burst = 300
	}
	return config
}

// serverCacheDir is where the plugin keeps what it may about the API
// server at host: kubectl's cache directory (--cache-dir, KUBECACHEDIR,
// ~/.kube/cache), in a directory of its own, one per server, so that one
// server's answers are never taken for another's.
func serverCacheDir(flags *genericclioptions.ConfigFlags, host string) string {
	if flags.CacheDir == nil || *flags.CacheDir == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(host))
	return filepath.Join(*flags.CacheDir, "kubectl-gitops", hex.EncodeToString(sum[:8]))
}

// engine builds the engine a command drives, as its Factory builds it.
func (f *engineFlags) engine() (*breakglass.Engine, error) { return f.newEngine(f) }

// clusterEngine builds the break-glass engine from the kubeconfig flags;
// the audit log lives in --audit-namespace.
func (f *engineFlags) clusterEngine() (*breakglass.Engine, error) {
	config, kube, err := kubeClient(f.configFlags)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	mapper, err := f.configFlags.ToRESTMapper()
	if err != nil {
		return nil, err
	}
	e := &breakglass.Engine{Client: argocd.Client{Kube: kube, Dynamic: dyn, Metadata: meta, Mapper: mapper, AppNamespace: f.AppNamespace, ArgoNamespace: f.ArgoNamespace, CacheDir: serverCacheDir(f.configFlags, config.Host)}, Audit: audit.NewConfigMapStore(kube, f.AuditNamespace)}
	e.Clusters = kubeconfigClusters{flags: f.configFlags}
	e.Tickets = jira()
	argo, err := f.argoServer()
	if err != nil {
		return nil, err
	}
	if argo != nil {
		e.ArgoUI = argo.URL()
	}
	return e, nil
}

// jira is the Jira client from the environment and the config file, or
// Jira off, saying why (then tickets are queued).
func jira() breakglass.Tickets {
	j, err := jiraClient()
	if err != nil {
		return ticket.Off{Why: err}
	}
	return j
}

// jiraClient is the Jira client of the environment and the config file;
// ticket.New validates the configuration.
func jiraClient() (*ticket.Jira, error) {
	cfg, err := ticket.LoadConfig(os.Getenv)
	if err != nil {
		return nil, err
	}
	return ticket.New(cfg)
}

// argoServer is the Argo CD API server from the argocd CLI's environment,
// else from its configuration (`argocd login`), or nil when neither names
// one.
func (f *engineFlags) argoServer() (*argocd.Server, error) {
	return argoServer(f.ArgoContext)
}

func argoServer(context string) (*argocd.Server, error) {
	if s, ok := argocd.ServerFromEnv(); ok && context == "" {
		return &s, nil
	}
	s, ok, err := argocd.ServerFromConfig(argocd.ConfigPath(), context)
	if err != nil || !ok {
		return nil, err
	}
	return &s, nil
}
