// Package env starts the real components kubectl gitops is tested against,
// on loopback with free ports and temporary directories: etcd, kube-apiserver
// (RBAC on, client-certificate users), the Argo CD CRDs and configuration,
// redis-server, and Argo CD's repo-server, application-controller and API
// server, reading a Git repository on disk. It is used by the e2e tests and by
// `make demo`; it must never be imported by the product's own packages.
package env

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Options shape an environment. The zero value starts everything with the
// timings the tests expect.
type Options struct {
	// KubeOnly starts only etcd and kube-apiserver.
	KubeOnly bool
	// APIOnly installs in the API server all that the full environment
	// does (Argo CD's CRDs and configuration, the users' roles, deploy/rbac,
	// deploy/policy, the digest key) and the Git repository, but starts no
	// Argo CD process: enough for the admission policies' tests, which need
	// only the API server and kubectl.
	APIOnly bool
	// AppResync is the controller's periodic resync (--app-resync).
	AppResync time.Duration
	// SelfHealTimeout is the controller's pause between self-heal attempts;
	// 0 means 1s, negative means none at all (the most aggressive).
	SelfHealTimeout time.Duration
	// Dir keeps the environment's files there instead of a new temporary
	// directory (kept after Stop, for `make demo`).
	Dir string
}

// Env is a running environment. Stop it when done.
type Env struct {
	// Dir holds data, certificates, kubeconfigs, logs and the Git repository.
	Dir string
	// Server is the kube-apiserver URL.
	Server string
	// Git is the repository Argo CD reads; nil with KubeOnly.
	Git *GitRepo
	// ArgoServerAddr is host:port of the plaintext Argo CD API server; ""
	// with APIOnly.
	ArgoServerAddr string
	// ArgoNamespace is where Argo CD's configuration and Applications live.
	ArgoNamespace string
	// ArgoBinary is the Argo CD binary the environment runs (multi-call:
	// ARGOCD_BINARY_NAME picks the component), RepoServerAddr its
	// repo-server's plaintext host:port.
	ArgoBinary, RepoServerAddr string
	// Renderers is the directory of the helm and kustomize the
	// repo-server runs: a user proposing to a Helm chart needs helm too.
	Renderers string
	// Kube is the Kubernetes release of the API server, Argo the Argo CD
	// release running (whose CRDs are installed, with APIOnly too).
	Kube KubeRelease
	Argo ArgoRelease
	// DigestKey is the installation's key of the audit records' keyed
	// digests (the secret kubectl-gitops-digest-key, id 1), as the install
	// creates it: what an auditor holds to check a raw patch.
	DigestKey string

	adminPassword string
	// oncallPassword is the on-call engineer's read-only Argo CD account's.
	oncallPassword string
	keepDir        bool
	procs          []*process
	// s3 is the S3 server, once a test asked for it.
	s3          *S3
	tsa         *TSA
	kubeconfigs map[string]string
}

// ArgoNamespace is the namespace of Argo CD's objects in every environment.
const ArgoNamespace = "argocd"

// Start brings up an environment, returning once every component is ready.
// On error everything already started is stopped.
func Start(ctx context.Context, opts Options) (env *Env, err error) {
	bins, err := FindBinaries(!opts.KubeOnly && !opts.APIOnly)
	if err != nil {
		return nil, err
	}
	e := &Env{Dir: opts.Dir, keepDir: opts.Dir != "", ArgoNamespace: ArgoNamespace, Kube: bins.Kube, kubeconfigs: map[string]string{}}
	if e.Dir == "" {
		if e.Dir, err = os.MkdirTemp("", "kubectl-gitops-env-"); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, e.LogTails(40))
			e.Stop()
		}
	}()
	for _, sub := range []string{"logs", "pki", "etcd", "home"} {
		if err := os.MkdirAll(filepath.Join(e.Dir, sub), 0o755); err != nil {
			return e, err
		}
	}
	if err := e.startKube(ctx, bins); err != nil {
		return e, err
	}
	if opts.KubeOnly {
		return e, nil
	}
	if opts.AppResync == 0 {
		opts.AppResync = 10 * time.Second
	}
	switch {
	case opts.SelfHealTimeout == 0:
		opts.SelfHealTimeout = time.Second
	case opts.SelfHealTimeout < 0:
		opts.SelfHealTimeout = 0
	}
	if e.Git, err = newGitRepo(filepath.Join(e.Dir, "git", "fixture")); err != nil {
		return e, err
	}
	if opts.APIOnly {
		return e, e.installArgoCD(ctx, bins)
	}
	if err := e.startArgoCD(ctx, bins, opts); err != nil {
		return e, err
	}
	return e, nil
}

// ArgoRunning is whether Argo CD's processes run (not with APIOnly).
func (e *Env) ArgoRunning() bool { return e.ArgoServerAddr != "" }

func (e *Env) startKube(ctx context.Context, bins Binaries) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	etcd, err := e.start("etcd", nil, bins.Etcd,
		"--name=default", "--data-dir="+filepath.Join(e.Dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL, "--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return err
	}
	if err := etcd.waitFor(ctx, time.Minute, httpReady(http.DefaultClient, etcdURL+"/health")); err != nil {
		return err
	}

	pki := filepath.Join(e.Dir, "pki")
	ca, err := newAuthority()
	if err != nil {
		return err
	}
	caPath := filepath.Join(pki, "ca.crt")
	servingCert, servingKey, err := ca.issue(pkix.Name{CommonName: "kube-apiserver"}, true)
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{"ca.crt": ca.certPEM, "apiserver.crt": servingCert, "apiserver.key": servingKey} {
		if err := os.WriteFile(filepath.Join(pki, name), data, 0o600); err != nil {
			return err
		}
	}
	saPub, saKey, err := writeServiceAccountKeys(pki)
	if err != nil {
		return err
	}
	e.Server = "https://127.0.0.1:" + strconv.Itoa(apiPort)
	for _, u := range Users {
		cert, key, err := ca.issue(pkix.Name{CommonName: u.Name, Organization: u.Groups}, false)
		if err != nil {
			return err
		}
		path := filepath.Join(e.Dir, "kubeconfig-"+u.Name)
		if err := writeKubeconfig(path, e.Server, ca.certPEM, cert, key, u.Name); err != nil {
			return err
		}
		e.kubeconfigs[u.Name] = path
	}

	api, err := e.start("kube-apiserver", nil, bins.KubeAPIServer,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(apiPort),
		"--tls-cert-file="+filepath.Join(pki, "apiserver.crt"), "--tls-private-key-file="+filepath.Join(pki, "apiserver.key"),
		"--client-ca-file="+caPath, "--cert-dir="+pki,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+saPub, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		// Nothing in the environment reaches the API server through the
		// kubernetes Service, and 1.37 refuses to reconcile its endpoints
		// to a loopback address.
		"--endpoint-reconciler-type=none",
		"--authorization-mode=RBAC",
		// No kube-controller-manager runs, so nothing would mint the tokens
		// the ServiceAccount admission plugin insists on.
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true", "--profiling=false")
	if err != nil {
		return err
	}
	admin, err := e.RESTConfig(Admin.Name)
	if err != nil {
		return err
	}
	transport, err := rest.TransportFor(admin)
	if err != nil {
		return err
	}
	if err := api.waitFor(ctx, 2*time.Minute, httpReady(&http.Client{Transport: transport, Timeout: 5 * time.Second}, e.Server+"/readyz")); err != nil {
		return err
	}
	return e.checkKubeVersion(admin)
}

// checkKubeVersion asks the API server its version: the tests name the
// release they ran on, so a binary of another release (TEST_ASSET_KUBE_APISERVER
// aside) is an error, not a quiet substitute.
func (e *Env) checkKubeVersion(admin *rest.Config) error {
	client, err := discovery.NewDiscoveryClientForConfig(admin)
	if err != nil {
		return err
	}
	info, err := client.ServerVersion()
	if err != nil {
		return fmt.Errorf("asking kube-apiserver its version: %w", err)
	}
	if os.Getenv("TEST_ASSET_KUBE_APISERVER") != "" {
		e.Kube.Version = strings.TrimPrefix(info.GitVersion, "v")
		return nil
	}
	if info.GitVersion != "v"+e.Kube.Version {
		return fmt.Errorf("kube-apiserver of hack/tools/%s says it is %s, want v%s", e.Kube.Tools, info.GitVersion, e.Kube.Version)
	}
	return nil
}

func (e *Env) start(name string, env []string, bin string, args ...string) (*process, error) {
	p, err := startProcess(name, filepath.Join(e.Dir, "logs"), env, bin, args...)
	if err != nil {
		return nil, err
	}
	e.procs = append(e.procs, p)
	return p, nil
}

// Kubeconfig returns the path of the kubeconfig for the named user (one of
// Users).
func (e *Env) Kubeconfig(user string) string { return e.kubeconfigs[user] }

// RESTConfig returns a client configuration for the named user.
func (e *Env) RESTConfig(user string) (*rest.Config, error) {
	path, ok := e.kubeconfigs[user]
	if !ok {
		return nil, fmt.Errorf("no user %q in the test environment", user)
	}
	return clientcmd.BuildConfigFromFlags("", path)
}

// Stop ends every component, newest first, and removes the environment's
// directory unless Options.Dir chose it.
func (e *Env) Stop() {
	for i := len(e.procs) - 1; i >= 0; i-- {
		e.procs[i].stop(10 * time.Second)
	}
	e.procs = nil
	if !e.keepDir && e.Dir != "" {
		os.RemoveAll(e.Dir)
	}
}

// Exited returns an error naming any component that has stopped running.
func (e *Env) Exited() error {
	var errs []error
	for _, p := range e.procs {
		if done, err := p.exited(); done {
			errs = append(errs, fmt.Errorf("%s exited: %v", p.name, err))
		}
	}
	return errors.Join(errs...)
}

// LogTails returns the last n lines of every component's log, for a failing
// test to print.
func (e *Env) LogTails(n int) string {
	s := ""
	for _, p := range e.procs {
		s += fmt.Sprintf("----- %s (%s) -----\n%s\n", p.name, p.logPath, p.tail(n))
	}
	return s
}
