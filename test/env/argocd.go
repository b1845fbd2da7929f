package env

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// DemoNamespace is where the fixture application's resources live.
const DemoNamespace = "demo"

// TeamNamespaces is the pattern of the namespaces outside ArgoNamespace
// whose Applications Argo CD reconciles.
const TeamNamespaces = "team-*"

func (e *Env) startArgoCD(ctx context.Context, bins Binaries, opts Options) error {
	ports, err := freePorts(8)
	if err != nil {
		return err
	}
	redisAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	repoAddr := "127.0.0.1:" + strconv.Itoa(ports[1])
	e.ArgoBinary, e.RepoServerAddr, e.Renderers = bins.ArgoCD, repoAddr, bins.Renderers
	e.ArgoServerAddr = "127.0.0.1:" + strconv.Itoa(ports[2])
	if err := e.installArgoCD(ctx, bins); err != nil {
		return err
	}

	kubeconfig := e.Kubeconfig(Admin.Name)
	home := filepath.Join(e.Dir, "home")
	common := []string{
		"HOME=" + home,
		"KUBECONFIG=" + kubeconfig,
		"ARGOCD_FAKE_IN_CLUSTER=true",
		"ARGOCD_GPG_ENABLED=false",
		"ARGOCD_SSH_DATA_PATH=" + filepath.Join(home, "ssh"),
		"ARGOCD_TLS_DATA_PATH=" + filepath.Join(home, "tls"),
		"ARGOCD_PLUGINSOCKFILEPATH=" + filepath.Join(home, "plugins"),
		"ARGOCD_GNUPGHOME=" + filepath.Join(home, "gnupg"),
		// The repo-server's askpass socket defaults to one path in /tmp
		// for every repo-server on the host: two environments at once
		// (make e2e's shards) raced for it and one repo-server died with
		// "bind: address already in use".
		"ARGOCD_ASK_PASS_SOCK=" + filepath.Join(home, "askpass.sock"),
		// Applications in any namespace, as Argo CD calls it: teams keep
		// theirs in their own namespaces, and the default project lets them.
		"ARGOCD_APPLICATION_NAMESPACES=" + TeamNamespaces,
	}
	for _, sub := range []string{"ssh", "tls", "plugins", "gnupg", "bin"} {
		if err := os.MkdirAll(filepath.Join(home, sub), 0o700); err != nil {
			return err
		}
	}
	if bins.Argo.Major() >= 3 {
		// The 3.x repo-server runs git through git-verify-wrapper.sh from
		// PATH; the module's copy is read-only and not executable.
		if err := installWrapper(bins.Argo, filepath.Join(home, "bin")); err != nil {
			return err
		}
	}
	// The repo-server runs helm and kustomize from PATH, as its image has
	// them, to render Helm and kustomize sources.
	common = append(common, "PATH="+strings.Join([]string{filepath.Join(home, "bin"), bins.Renderers, os.Getenv("PATH")}, string(os.PathListSeparator)))

	redis, err := e.start("redis-server", nil, bins.Redis,
		"--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", home)
	if err != nil {
		return err
	}
	if err := redis.waitFor(ctx, 30*time.Second, tcpReady(redisAddr)); err != nil {
		return err
	}

	repo, err := e.start("argocd-repo-server", append(common, "ARGOCD_BINARY_NAME=argocd-repo-server"), bins.ArgoCD,
		append([]string{"--address=127.0.0.1", "--port=" + strconv.Itoa(ports[1]),
			"--metrics-address=127.0.0.1", "--metrics-port=" + strconv.Itoa(ports[3]),
			"--redis=" + redisAddr, "--disable-tls"}, repoServerFlags(bins.Argo)...)...)
	if err != nil {
		return err
	}
	if err := repo.waitFor(ctx, time.Minute, tcpReady(repoAddr)); err != nil {
		return err
	}

	var hydrator []string
	if bins.Argo.Major() >= 3 {
		// The source hydrator's commit server renders dry sources into
		// branches of the repository (3.x only).
		commitAddr := "127.0.0.1:" + strconv.Itoa(ports[6])
		// The commit server's askpass socket is a fixed path in /tmp that
		// no setting moves: it removes the file and binds it, so two
		// environments starting at once must take turns.
		err := onePerHost("argocd-commit-server", func() error {
			// It starts well after its ports were chosen, and an outgoing
			// connection may have been given one of them meanwhile (a
			// clean-clone run lost one): such a start is tried again on
			// other ports.
			return retryBind(3, []int{ports[6], ports[7]}, func(p []int) error {
				commitAddr = "127.0.0.1:" + strconv.Itoa(p[0])
				commit, err := e.start("argocd-commit-server", append(common, "ARGOCD_BINARY_NAME=argocd-commit-server"), bins.ArgoCD,
					"--address=127.0.0.1", "--port="+strconv.Itoa(p[0]),
					"--metrics-address=127.0.0.1", "--metrics-port="+strconv.Itoa(p[1]))
				if err != nil {
					return err
				}
				return commit.waitFor(ctx, time.Minute, tcpReady(commitAddr))
			})
		})
		if err != nil {
			return err
		}
		hydrator = []string{"--hydrator-enabled", "--commit-server=" + commitAddr}
	}

	controller, err := e.start("argocd-application-controller", append(common, "ARGOCD_BINARY_NAME=argocd-application-controller"), bins.ArgoCD,
		append([]string{"--kubeconfig=" + kubeconfig, "--namespace=" + ArgoNamespace,
			"--repo-server=" + repoAddr, "--repo-server-plaintext", "--redis=" + redisAddr,
			"--metrics-port=" + strconv.Itoa(ports[4]),
			"--app-resync=" + strconv.Itoa(int(opts.AppResync.Seconds())),
			"--self-heal-timeout-seconds=" + strconv.Itoa(int(opts.SelfHealTimeout.Seconds())),
			// Without this the controller backs off exponentially between
			// self-heals and the timeout above stops being the period.
			"--self-heal-backoff-timeout-seconds=0",
			"--status-processors=4", "--operation-processors=4"}, hydrator...)...)
	if err != nil {
		return err
	}
	if err := controller.waitFor(ctx, time.Minute, httpReady(http.DefaultClient, "http://127.0.0.1:"+strconv.Itoa(ports[4])+"/healthz")); err != nil {
		return err
	}

	server, err := e.start("argocd-server", append(common, "ARGOCD_BINARY_NAME=argocd-server"), bins.ArgoCD,
		"--kubeconfig="+kubeconfig, "--namespace="+ArgoNamespace, "--insecure",
		"--address=127.0.0.1", "--port="+strconv.Itoa(ports[2]), "--metrics-port="+strconv.Itoa(ports[5]),
		"--repo-server="+repoAddr, "--repo-server-plaintext", "--redis="+redisAddr,
		"--staticassets="+filepath.Join(home, "static"))
	if err != nil {
		return err
	}
	return server.waitFor(ctx, time.Minute, httpReady(http.DefaultClient, "http://"+e.ArgoServerAddr+"/healthz"))
}

// onePerHost runs start while holding a lock every environment on this
// host shares, for a process that takes a host-wide resource as it starts.
// retryBind starts a process on ports, and again on fresh ones, up to
// attempts times in all, when it could not bind them.
func retryBind(attempts int, ports []int, start func([]int) error) error {
	for i := 1; ; i++ {
		err := start(ports)
		if err == nil || i == attempts || !strings.Contains(err.Error(), "address already in use") {
			return err
		}
		if ports, err = freePorts(len(ports)); err != nil {
			return err
		}
	}
}

func onePerHost(name string, start func() error) error {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "kubectl-gitops-env-"+name+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it too
	return start()
}

// installArgoCD puts in the API server what an install of Argo CD and of
// kubectl gitops does: the release's CRDs, Argo CD's namespace and
// configuration, the users' roles, deploy/rbac, deploy/policy and the
// digest key.
func (e *Env) installArgoCD(ctx context.Context, bins Binaries) error {
	admin, err := e.RESTConfig(Admin.Name)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(admin)
	if err != nil {
		return err
	}
	if err := installCRDs(ctx, dyn, bins.Argo); err != nil {
		return err
	}
	e.Argo = bins.Argo
	if err := e.configureArgoCD(ctx, kube, dyn); err != nil {
		return err
	}
	if err := grantTestRoles(ctx, kube, dyn, bins.Argo); err != nil {
		return err
	}
	e.DigestKey, err = createDigestKey(ctx, kube)
	return err
}

// repoServerFlags are the flags a release's repo-server needs beside
// --disable-tls: 3.x refuses to start without an explicit (empty) client CA.
func repoServerFlags(r ArgoRelease) []string {
	if r.Major() >= 3 {
		return []string{"--client-ca-path="}
	}
	return nil
}

// installWrapper copies the release's git-verify-wrapper.sh into dir, executable.
func installWrapper(r ArgoRelease, dir string) error {
	module, err := r.moduleDir()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(module, "hack", "git-verify-wrapper.sh"))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "git-verify-wrapper.sh"), data, 0o755)
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRDs creates the CRDs of the Argo CD release under test, from its
// own module (3.x's Application has automated.enabled, 2.14's does not).
func installCRDs(ctx context.Context, dyn dynamic.Interface, release ArgoRelease) error {
	dir, err := release.moduleDir()
	if err != nil {
		return err
	}
	var names []string
	for _, file := range []string{"application-crd.yaml", "appproject-crd.yaml", "applicationset-crd.yaml"} {
		objs, err := readObjects(filepath.Join(dir, "manifests", "crds", file))
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if _, err := dyn.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating CRD %s: %w", obj.GetName(), err)
			}
			names = append(names, obj.GetName())
		}
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			crd, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, c := range conditions {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", name, err)
		}
	}
	return nil
}

// readObjects decodes every YAML document of path.
func readObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if obj != nil {
			objs = append(objs, &unstructured.Unstructured{Object: obj})
		}
	}
}

func (e *Env) configureArgoCD(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface) error {
	for _, ns := range []string{ArgoNamespace, DemoNamespace} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	secretKey := make([]byte, 32)
	if _, err := rand.Read(secretKey); err != nil {
		return err
	}
	e.adminPassword = hex.EncodeToString(secretKey[:8])
	e.oncallPassword = hex.EncodeToString(secretKey[8:16])
	hash, err := bcrypt.GenerateFromPassword([]byte(e.adminPassword), bcrypt.MinCost)
	if err != nil {
		return err
	}
	oncallHash, err := bcrypt.GenerateFromPassword([]byte(e.oncallPassword), bcrypt.MinCost)
	if err != nil {
		return err
	}
	labels := map[string]string{"app.kubernetes.io/part-of": "argocd"}
	configMaps := map[string]map[string]string{
		// The on-call engineer's Argo CD account is read-only, as README's
		// install gives it: enough for the field-level check and status.
		"argocd-cm":                 {"admin.enabled": "true", "accounts." + OncallArgoAccount: "login"},
		"argocd-rbac-cm":            {"policy.default": "", "policy.csv": "g, " + OncallArgoAccount + ", role:readonly\n"},
		"argocd-cmd-params-cm":      {},
		"argocd-tls-certs-cm":       {},
		"argocd-ssh-known-hosts-cm": {},
		"argocd-gpg-keys-cm":        {},
	}
	if e.ArgoRunning() {
		configMaps["argocd-cm"]["url"] = "http://" + e.ArgoServerAddr
	}
	for name, data := range configMaps {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ArgoNamespace, Labels: labels}, Data: data}
		if _, err := kube.CoreV1().ConfigMaps(ArgoNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-secret", Namespace: ArgoNamespace, Labels: labels},
		StringData: map[string]string{
			"admin.password":                                   string(hash),
			"admin.passwordMtime":                              time.Now().UTC().Format(time.RFC3339),
			"accounts." + OncallArgoAccount + ".password":      string(oncallHash),
			"accounts." + OncallArgoAccount + ".passwordMtime": time.Now().UTC().Format(time.RFC3339),
			"server.secretkey":                                 hex.EncodeToString(secretKey),
		},
	}
	if _, err := kube.CoreV1().Secrets(ArgoNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return err
	}
	project := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "AppProject",
		"metadata":   map[string]any{"name": "default", "namespace": ArgoNamespace},
		"spec": map[string]any{
			"sourceRepos":              []any{"*"},
			"sourceNamespaces":         []any{TeamNamespaces},
			"destinations":             []any{map[string]any{"server": "*", "namespace": "*"}},
			"clusterResourceWhitelist": []any{map[string]any{"group": "*", "kind": "*"}},
		},
	}}
	gvr := schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "appprojects"}
	_, err = dyn.Resource(gvr).Namespace(ArgoNamespace).Create(ctx, project, metav1.CreateOptions{})
	return err
}

// grantTestRoles gives the environment's users the rights their names
// promise, as docs/rbac.md tells an install to: deploy/rbac as shipped, with
// on-call's team role bound in the demo's namespace (and in each namespace a
// test makes for a team, TeamNamespace), never in Argo CD's; auditors read
// what the cluster's own view role would let them (the tool does not ship
// that), nobody gets nothing. The rules are explicit because no
// kube-controller-manager runs to fill the aggregated view role.
func grantTestRoles(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, release ArgoRelease) error {
	read := []string{"get", "list", "watch"}
	auditors := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-auditors"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets", "replicasets"}, Verbs: read},
		{APIGroups: []string{""}, Resources: []string{"configmaps", "services", "pods", "namespaces"}, Verbs: read},
		{APIGroups: []string{"argoproj.io"}, Resources: []string{"applications", "appprojects", "applicationsets"}, Verbs: read},
	}}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, auditors, metav1.CreateOptions{}); err != nil {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-auditors"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "test-auditors"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: Auditor.Groups[0]}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := applyShipped(ctx, dyn, "rbac", nil); err != nil {
		return err
	}

	if err := applyShipped(ctx, dyn, "policy", policyFor(release)); err != nil {
		return err
	}
	if err := TeamNamespace(ctx, kube, DemoNamespace); err != nil {
		return err
	}
	return waitPolicyEnforced(ctx, kube)
}

// OncallTeamRole is deploy/rbac/oncall-team.yaml's ClusterRole: on-call's
// rights on the workloads (and Applications) of a team's namespace.
const OncallTeamRole = "kubectl-gitops-oncall-team"

// TeamNamespace makes namespace name a team's, as docs/rbac.md says an
// install does: the namespace, and on-call's team role bound there. It
// may exist already; the binding is made once.
func TeamNamespace(ctx context.Context, kube kubernetes.Interface, name string) error {
	if name == ArgoNamespace {
		return fmt.Errorf("namespace %s is Argo CD's and the controller's, never a team's: on-call's team role is not bound there", name)
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: OncallTeamRole, Namespace: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: OncallTeamRole},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: Oncall.Groups[0]}},
	}
	if _, err := kube.RbacV1().RoleBindings(name).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// createDigestKey creates the installation's digest key as README's
// install does (32 random bytes, hex, as id 1) and returns it.
func createDigestKey(ctx context.Context, kube kubernetes.Interface) (string, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kubectl-gitops-digest-key", Namespace: ArgoNamespace},
		Data: map[string][]byte{"id": []byte("1"), "key.1": []byte(hex.EncodeToString(key))}}
	_, err := kube.CoreV1().Secrets(ArgoNamespace).Create(ctx, secret, metav1.CreateOptions{})
	return string(secret.Data["key.1"]), err
}

// shippedKinds are the kinds deploy/ may hold, with their API resources.
var shippedKinds = map[string]schema.GroupVersionResource{
	"Role":                             {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":                      {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"ClusterRole":                      {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	"ClusterRoleBinding":               {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	"ValidatingAdmissionPolicy":        {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
	"ValidatingAdmissionPolicyBinding": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
}

// policyFor is the one change deploy/policy asks of an install for the
// Argo CD release: before 3.1 (2.14, whose Application schema has no
// automated.enabled) the pause removes automated, so the Application
// policy's removeForm variable is set to true. nil changes nothing.
func policyFor(release ArgoRelease) func(*unstructured.Unstructured) error {
	if release.Major() >= 3 {
		return nil
	}
	return func(obj *unstructured.Unstructured) error {
		if obj.GetKind() != "ValidatingAdmissionPolicy" || obj.GetName() != "kubectl-gitops-breakglass-applications" {
			return nil
		}
		variables, _, _ := unstructured.NestedSlice(obj.Object, "spec", "variables")
		for _, v := range variables {
			if m, ok := v.(map[string]any); ok && m["name"] == "removeForm" {
				m["expression"] = "true"
				return unstructured.SetNestedSlice(obj.Object, variables, "spec", "variables")
			}
		}
		return fmt.Errorf("policy %s has no removeForm variable to set for Argo CD %s", obj.GetName(), release.Version)
	}
}

// applyShipped creates the objects of deploy/DIR as shipped, changed only
// by edit (when not nil) as the install instructions say, so the tests
// exercise the manifests users install.
func applyShipped(ctx context.Context, dyn dynamic.Interface, dir string, edit func(*unstructured.Unstructured) error) error {
	files, err := filepath.Glob(filepath.Join(RepoRoot(), "deploy", dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no manifests in deploy/%s: %v", dir, err)
	}
	for _, file := range files {
		objs, err := readObjects(file)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			gvr, ok := shippedKinds[obj.GetKind()]
			if !ok {
				return fmt.Errorf("%s: unexpected kind %s", file, obj.GetKind())
			}
			if edit != nil {
				if err := edit(obj); err != nil {
					return fmt.Errorf("%s: %w", file, err)
				}
			}
			var client dynamic.ResourceInterface = dyn.Resource(gvr)
			if ns := obj.GetNamespace(); ns != "" {
				client = dyn.Resource(gvr).Namespace(ns)
			}
			if _, err := client.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("%s: creating %s %s: %w", file, obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	return nil
}

// OncallArgoAccount is the on-call engineer's Argo CD account: local,
// read-only (role:readonly).
const OncallArgoAccount = "oncall"

// ArgoToken logs in to the Argo CD API server as the on-call engineer's
// read-only account and returns a session token usable as
// ARGOCD_AUTH_TOKEN: what every test and the demo give the on-call shell.
func (e *Env) ArgoToken(ctx context.Context) (string, error) {
	return e.argoLogin(ctx, OncallArgoAccount, e.oncallPassword)
}

// ArgoAdminToken is Argo CD's admin's token, for a test that acts as a
// colleague with more Argo CD rights than on-call (a Sync, say): such a
// test says so.
func (e *Env) ArgoAdminToken(ctx context.Context) (string, error) {
	return e.argoLogin(ctx, "admin", e.adminPassword)
}

// ArgoAdmin sends a request to argocd-server's REST API as Argo CD's admin
// (a colleague with more Argo CD rights than on-call: a Sync, an edit of the
// source), with body as JSON, and fails unless it is answered 200 OK.
func (e *Env) ArgoAdmin(ctx context.Context, method, path string, body []byte) error {
	token, err := e.ArgoAdminToken(ctx)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+e.ArgoServerAddr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s %s through argocd-server: %s: %s", method, path, resp.Status, b)
	}
	return nil
}

func (e *Env) argoLogin(ctx context.Context, username, password string) (string, error) {
	body, _ := json.Marshal(map[string]string{"username": username, "password": password})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+e.ArgoServerAddr+"/api/v1/session", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Token string `json:"token"`
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("argo cd login: %s: %s", resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", err
	}
	return out.Token, nil
}

// RegisterCluster registers the environment's API server with Argo CD a
// second time, as a destination cluster called name at its own URL
// (e.Server) with the admin's certificate, the way `argocd cluster add`
// does. Applications deploying to that URL go through Argo CD's remote
// cluster path. It returns the URL.
func (e *Env) RegisterCluster(ctx context.Context, name string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(e.Kubeconfig(Admin.Name))
	if err != nil {
		return "", err
	}
	auth, cluster := cfg.AuthInfos[Admin.Name], cfg.Clusters[ContextName]
	config, err := json.Marshal(map[string]any{"tlsClientConfig": map[string]any{
		"caData": cluster.CertificateAuthorityData, "certData": auth.ClientCertificateData, "keyData": auth.ClientKeyData,
	}})
	if err != nil {
		return "", err
	}
	admin, err := e.RESTConfig(Admin.Name)
	if err != nil {
		return "", err
	}
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return "", err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-" + name, Namespace: e.ArgoNamespace, Labels: map[string]string{"argocd.argoproj.io/secret-type": "cluster"}},
		StringData: map[string]string{"name": name, "server": e.Server, "config": string(config)},
	}
	if _, err := kube.CoreV1().Secrets(e.ArgoNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	return e.Server, nil
}

// waitPolicyEnforced waits until the API server enforces the shipped
// admission policies (they load asynchronously): a record ConfigMap with a
// name outside the pattern is refused.
func waitPolicyEnforced(ctx context.Context, kube kubernetes.Interface) error {
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubectl-gitops-audit-probe", Namespace: ArgoNamespace}}
	// The events policy is applied last (deploy/policy/events.yaml): each
	// policy is enforced once the API server has loaded it, and a test run
	// first once met an audit policy in force and the events one not yet.
	event := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "kubectl-gitops-policy-probe", Namespace: ArgoNamespace},
		InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: ArgoNamespace, Name: "probe"},
		Reason:         "Probe", ReportingController: "kubectl-gitops-controller", ReportingInstance: "probe",
		Source: corev1.EventSource{Component: "kubectl-gitops-controller"}, Type: corev1.EventTypeNormal}
	refused := func(err error) bool { return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) }
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := kube.CoreV1().ConfigMaps(ArgoNamespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if refused(err) {
			// Forbidden only: an Event the API server found invalid would
			// say nothing of the policy.
			if _, err = kube.CoreV1().Events(ArgoNamespace).Create(ctx, event, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); apierrors.IsForbidden(err) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the admission policies of deploy/policy are not enforced after 30s (probe: %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
