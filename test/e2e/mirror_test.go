//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// mirrorEnv is one mirror test's bucket and audit namespace.
type mirrorEnv struct {
	t      *testing.T
	s3     *env.S3
	bucket string
	ns     string
	// url is the mirror as the commands name it, flags its endpoint.
	url   string
	flags []string
}

// newMirror starts the environment's S3 server, creates a bucket (with
// Object Lock when locked) and an audit namespace the on-call group and
// the controller may write records to.
func newMirror(t *testing.T, name string, locked bool) *mirrorEnv {
	t.Helper()
	environment(t)
	ctx := context.Background()
	server, err := testEnv.S3(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := &mirrorEnv{t: t, s3: server, bucket: "mirror-" + name, ns: "audit-mirror-" + name}
	if err := server.CreateBucket(ctx, m.bucket, locked); err != nil {
		t.Fatal(err)
	}
	m.url = "s3://" + m.bucket + "/prod"
	m.flags = []string{"--mirror", m.url, "--mirror-endpoint", server.Endpoint}
	m.grant()
	return m
}

// grant creates the audit namespace (again, after a test deleted it) and
// lets the on-call group and the controller's ServiceAccount write
// records there, as deploy/rbac and deploy/controller do in argocd.
func (m *mirrorEnv) grant() {
	t := m.t
	t.Helper()
	ctx := context.Background()
	kube := kubeFor(t, env.Admin.Name)
	create := func(err error) {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: m.ns}}, metav1.CreateOptions{})
	create(err)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "audit-writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{audit.HeadName}, Verbs: []string{"update", "patch"}},
	}}
	_, err = kube.RbacV1().Roles(m.ns).Create(ctx, role, metav1.CreateOptions{})
	create(err)
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "audit-writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "audit-writer"},
		Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: env.Oncall.Groups[0]},
			{Kind: "ServiceAccount", Name: "kubectl-gitops-controller", Namespace: env.ArgoNamespace}},
	}
	_, err = kube.RbacV1().RoleBindings(m.ns).Create(ctx, binding, metav1.CreateOptions{})
	create(err)
	// The controller's own rights there, as deploy/controller/rbac.yaml's:
	// the state it publishes, the start of a pruned log, and delete (which
	// the admission policy narrows to records).
	controllerRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "controller-writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{audit.StartName, audit.MirrorStateName}, Verbs: []string{"update"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"delete"}},
		{APIGroups: []string{"argoproj.io"}, Resources: []string{"applications"}, Verbs: []string{"get", "list", "watch"}}, // controllerFlags
	}}
	_, err = kube.RbacV1().Roles(m.ns).Create(ctx, controllerRole, metav1.CreateOptions{})
	create(err)
	_, err = kube.RbacV1().RoleBindings(m.ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "controller-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "controller-writer"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "kubectl-gitops-controller", Namespace: env.ArgoNamespace}}}, metav1.CreateOptions{})
	create(err)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	waitFor(waitCtx, t, "the audit-writer binding in "+m.ns+" to take effect", func() (bool, string) {
		_, err := kubeFor(t, env.Oncall.Name).CoreV1().ConfigMaps(m.ns).List(waitCtx, metav1.ListOptions{Limit: 1})
		return err == nil, fmt.Sprint(err)
	})
}

// lose deletes the audit namespace as a cluster admin would, and as the
// namespace controller (which the environment does not run) finishes it:
// its objects deleted, then its finalizer.
func (m *mirrorEnv) lose() {
	t := m.t
	t.Helper()
	ctx := context.Background()
	kube := kubeFor(t, env.Admin.Name)
	if err := kube.CoreV1().Namespaces().Delete(ctx, m.ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().ConfigMaps(m.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	ns, err := kube.CoreV1().Namespaces().Get(ctx, m.ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Spec.Finalizers = nil
	if _, err := kube.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	waitFor(waitCtx, t, "namespace "+m.ns+" to be gone", func() (bool, string) {
		_, err := kube.CoreV1().Namespaces().Get(waitCtx, m.ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// mirror opens the mirror as the tool does, with the root credentials.
func (m *mirrorEnv) mirror() *audit.Mirror {
	m.t.Helper()
	for _, kv := range m.s3.Env() {
		k, v, _ := strings.Cut(kv, "=")
		m.t.Setenv(k, v)
	}
	loc, err := audit.ParseMirrorURL(m.url)
	if err != nil {
		m.t.Fatal(err)
	}
	mirror, err := audit.OpenMirror(context.Background(), audit.MirrorOptions{Location: loc, Endpoint: m.s3.Endpoint, PathStyle: true})
	if err != nil {
		m.t.Fatal(err)
	}
	return mirror
}

// user is name with the mirror's credentials in its environment.
func (m *mirrorEnv) user(name string) *user { return newUser(m.t, name, m.s3.Env()...) }

// replica starts a controller mirroring the namespace's log through
// endpoint ("" for the server itself), with extra flags. It elects its
// leader on the shipped Lease, the only one the controller's RBAC allows.
func (m *mirrorEnv) replica(identity, endpoint string, extra ...string) *replica {
	m.t.Helper()
	if endpoint == "" {
		endpoint = m.s3.Endpoint
	}
	args := append(m.controllerFlags("--mirror", m.url, "--mirror-endpoint", endpoint, "--mirror-every", "200ms"), extra...)
	return startReplicaWith(m.t, identity, args, m.s3.Env())
}

// controllerFlags are a controller's flags for this log, then more. One
// install has one log, and its controller records a session annotation
// its log does not account for as breakglass.orphaned: a controller of
// this log watching the shared Applications would record every session of
// the environment's own log as an orphan here (each an extra record in a
// log whose records the tests count). So it watches the audit namespace's
// Applications, which are none.
func (m *mirrorEnv) controllerFlags(more ...string) []string {
	return append([]string{"--audit-namespace", m.ns, "--app-namespace", m.ns}, more...)
}

// versions lists every version of every record object, by key.
func (m *mirrorEnv) versions() map[string][]string {
	m.t.Helper()
	out := map[string][]string{}
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(m.bucket), Prefix: aws.String("prod/records/")}
	for {
		page, err := m.s3.Client().ListObjectVersions(context.Background(), in)
		if err != nil {
			m.t.Fatal(err)
		}
		for _, v := range page.Versions {
			out[aws.ToString(v.Key)] = append(out[aws.ToString(v.Key)], aws.ToString(v.VersionId))
		}
		if !aws.ToBool(page.IsTruncated) {
			return out
		}
		in.KeyMarker, in.VersionIdMarker = page.NextKeyMarker, page.NextVersionIdMarker
	}
}

// waitMirrored waits until the mirror's newest record is want.
func (m *mirrorEnv) waitMirrored(within time.Duration, want uint64) {
	m.t.Helper()
	mirror := m.mirror()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	waitFor(ctx, m.t, fmt.Sprintf("record %d in the mirror", want), func() (bool, string) {
		n, err := mirror.Newest(ctx, 0)
		return err == nil && n == want, fmt.Sprintf("newest %d (%v)", n, err)
	})
}

// appendRecords writes n records into the namespace's log as the admin
// (each opening a session of its own), returning the log's tip.
func (m *mirrorEnv) appendRecords(n int) uint64 {
	m.t.Helper()
	store := audit.NewConfigMapStore(kubeFor(m.t, env.Admin.Name), m.ns)
	var r *audit.Record
	for i := 0; i < n; i++ {
		r = &audit.Record{Event: audit.EventPlanned, Session: fmt.Sprintf("%s-%d", m.ns, i), Reason: "mirror test",
			Actor: audit.Actor{Username: env.Admin.Name}, Application: &audit.AppRef{Namespace: env.ArgoNamespace, Name: fmt.Sprintf("mirror-app-%d", i)}}
		if err := store.Append(context.Background(), r); err != nil {
			m.t.Fatal(err)
		}
	}
	return r.Seq
}

// checkpointKey writes a new ed25519 key as the controller's Secret would
// hold it, and its public key as an auditor keeps it.
func checkpointKey(t *testing.T) (private, public string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	private, public = filepath.Join(dir, "key.pem"), filepath.Join(dir, "key.pub")
	if err := os.WriteFile(private, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(public, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return private, public
}

// metricValue is the value of a metric without labels in a scrape.
func metricValue(scrape, name string) string {
	if m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(scrape); m != nil {
		return m[1]
	}
	return ""
}

// TestMirrorCopiesEveryRecordInOrderUnderLock: the controller, told to
// mirror with a retention, copies every record of the log (a real
// break-glass session's among them) as the exact bytes stored, one object
// per sequence number, each locked in compliance mode; the bucket refuses
// to delete a locked version, even for its root user; a plain delete only
// hides the record behind a marker, which verify names; /metrics says the
// bucket is write-once and nothing waits. A bucket without Object Lock is
// refused unless accepted, and then /metrics says so.
func TestMirrorCopiesEveryRecordInOrderUnderLock(t *testing.T) {
	m := newMirror(t, "order", true)
	ctx := context.Background()
	oncall := m.user(env.Oncall.Name)
	deployApp(t, "mirror-order")
	mustRun(t, oncall, 0, "breakglass", "mirror-order", "deployment/web", "--replicas", "3", "--reason", "mirrored", "-y", "--audit-namespace", m.ns)
	tip := m.appendRecords(5)

	r := m.replica("mirror-order-a", "", "--mirror-retention", "1h")
	m.waitMirrored(time.Minute, tip)
	store := audit.NewConfigMapStore(kubeFor(t, env.Admin.Name), m.ns)
	entries, err := store.Entries(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	versions := m.versions()
	if len(versions) != int(tip) {
		t.Fatalf("the mirror holds %d record objects, want %d", len(versions), tip)
	}
	mirror := m.mirror()
	for _, e := range entries {
		if e.Slot == 0 {
			continue
		}
		key := mirror.RecordKey(e.Slot)
		if len(versions[key]) != 1 {
			t.Errorf("%s has %d versions, want 1", key, len(versions[key]))
		}
		out, err := m.s3.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(m.bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if string(body) != string(e.Doc) {
			t.Errorf("%s holds other bytes than record %d in the cluster", key, e.Slot)
		}
		lock, err := m.s3.Client().GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: aws.String(m.bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("the retention of %s: %v", key, err)
		}
		if r := lock.Retention; r == nil || r.Mode != s3types.ObjectLockRetentionModeCompliance || r.RetainUntilDate == nil || time.Until(*r.RetainUntilDate) < 50*time.Minute {
			t.Errorf("%s is locked %+v, want compliance for about an hour", key, r)
		}
	}

	// The bucket's own answer to a delete of a locked version.
	first := mirror.RecordKey(1)
	_, err = m.s3.Client().DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(m.bucket), Key: aws.String(first), VersionId: aws.String(versions[first][0])})
	if err == nil {
		t.Fatalf("the server deleted a version of %s locked in compliance mode", first)
	}
	t.Logf("deleting a locked version: %v", err)
	if _, err := m.s3.Client().DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(m.bucket), Key: aws.String(first)}); err != nil {
		t.Fatal(err)
	}
	out, _ := mustRun(t, oncall, 1, append([]string{"audit", "verify", "--mirror-only"}, m.flags...)...)
	if !strings.Contains(out, "mirror-deleted: "+first) {
		t.Errorf("verify --mirror-only does not name the delete marker on %s:\n%s", first, out)
	}

	scrape := r.metrics(t)
	if metricValue(scrape, "kubectl_gitops_mirror_write_once") != "1" || metricValue(scrape, "kubectl_gitops_mirror_backlog_records") != "0" ||
		metricValue(scrape, "kubectl_gitops_mirror_newest_record") != strconv.FormatUint(tip, 10) {
		t.Errorf("/metrics of a caught-up mirror:\n%s", grepLines(scrape, "kubectl_gitops_mirror_"))
	}

	// A bucket anyone may empty is refused, unless accepted, and said.
	if err := m.s3.CreateBucket(ctx, "mirror-unlocked", false); err != nil {
		t.Fatal(err)
	}
	admin := m.user(env.Admin.Name)
	_, errOut, code := admin.run(filepath.Join(binDir, "kubectl-gitops"), "controller", "--audit-namespace", m.ns, "--lease-name", "mirror-refused",
		"--mirror", "s3://mirror-unlocked/x", "--mirror-endpoint", m.s3.Endpoint, "--address", "127.0.0.1:0", "--identity", "refused")
	if code != 2 || !strings.Contains(errOut, "no versioning and Object Lock") || !strings.Contains(errOut, "--mirror-accept-unlocked") {
		t.Errorf("controller against an unlocked bucket: exit %d, %s", code, errOut)
	}
	unlocked := startReplicaWith(t, "mirror-unlocked", m.controllerFlags(
		"--mirror", "s3://mirror-unlocked/x", "--mirror-endpoint", m.s3.Endpoint, "--mirror-accept-unlocked"), m.s3.Env())
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	waitFor(waitCtx, t, "the unlocked mirror to be said", func() (bool, string) {
		scrape := unlocked.metrics(t)
		return metricValue(scrape, "kubectl_gitops_mirror_write_once") == "0", grepLines(scrape, "kubectl_gitops_mirror_")
	})
	if strings.Contains(r.logs()+unlocked.logs(), m.s3.SecretKey) {
		t.Error("a controller's log holds the S3 secret key")
	}
}

// grepLines keeps the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// slowPuts is a proxy in front of the S3 server that holds every PUT for
// delay, so that a backlog takes a while to mirror.
func slowPuts(t *testing.T, endpoint string, delay time.Duration) string {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			time.Sleep(delay)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(server.Close)
	return server.URL
}

// TestMirrorBacklogSurvivesAKilledLeader: two replicas, a backlog of
// records; the leader is killed (no lease release) while mirroring, and
// the other, taking over, finishes from the mirror's newest object: every
// record once, in order, one version each, and verify of the cluster
// against the mirror is intact.
func TestMirrorBacklogSurvivesAKilledLeader(t *testing.T) {
	m := newMirror(t, "failover", true)
	tip := m.appendRecords(120)
	slow := slowPuts(t, m.s3.Endpoint, 50*time.Millisecond)
	a, b := m.replica("mirror-failover-a", slow), m.replica("mirror-failover-b", slow)
	leader := leaderOf(t, 30*time.Second, a, b)
	follower := a
	if leader == a {
		follower = b
	}
	mirror := m.mirror()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var atKill uint64
	waitFor(ctx, t, "the leader to be mid-backlog", func() (bool, string) {
		n, err := mirror.Newest(ctx, 0)
		atKill = n
		return err == nil && n >= 10, fmt.Sprintf("newest %d (%v)", n, err)
	})
	leader.kill()
	if atKill >= tip {
		t.Fatalf("the leader mirrored all %d records before it was killed: no backlog left to take over", tip)
	}
	if leaderOf(t, 30*time.Second, follower) != follower {
		t.Fatal("the follower did not take over")
	}
	m.waitMirrored(2*time.Minute, tip)
	versions := m.versions()
	for seq := uint64(1); seq <= tip; seq++ {
		if got := versions[mirror.RecordKey(seq)]; len(got) != 1 {
			t.Errorf("record %d has %d versions in the mirror, want exactly 1", seq, len(got))
		}
	}
	if len(versions) != int(tip) {
		t.Errorf("the mirror holds %d record objects, want %d", len(versions), tip)
	}
	auditor := m.user(env.Auditor.Name)
	out, _ := mustRun(t, auditor, 0, append([]string{"audit", "verify", "--audit-namespace", m.ns}, m.flags...)...)
	if !strings.Contains(out, fmt.Sprintf("chain intact: %d records", tip)) {
		t.Errorf("verify --mirror after the failover:\n%s", out)
	}
	scrape := follower.metrics(t)
	if metricValue(scrape, "kubectl_gitops_mirror_backlog_records") != "0" || metricValue(scrape, "kubectl_gitops_mirror_oldest_unmirrored_age_seconds") != "0" {
		t.Errorf("/metrics of the new leader once caught up:\n%s", grepLines(scrape, "kubectl_gitops_mirror_"))
	}
}

// TestMirrorRebuildsALostAuditNamespace: a session opened, its records
// mirrored with signed checkpoints; the audit namespace deleted. Verify
// against the mirror names every record lost; restore-log by the on-call
// group is refused by the API server, by a cluster admin over a namespace
// holding another record at a mirrored position is refused writing
// nothing, and otherwise writes the log back: verify is intact against the
// mirror with the checkpoints verified, the report reads the mirror
// alone, and the open session is restored as if nothing had happened.
func TestMirrorRebuildsALostAuditNamespace(t *testing.T) {
	m := newMirror(t, "rebuild", true)
	ctx := context.Background()
	private, public := checkpointKey(t)
	oncall, admin, auditor := m.user(env.Oncall.Name), m.user(env.Admin.Name), m.user(env.Auditor.Name)
	deployApp(t, "mirror-rebuild")
	mustRun(t, oncall, 0, "breakglass", "mirror-rebuild", "deployment/web", "--replicas", "3", "--reason", "kept off the cluster", "-y", "--audit-namespace", m.ns)
	store := audit.NewConfigMapStore(kubeFor(t, env.Admin.Name), m.ns)
	tip, err := store.Tip(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m.replica("mirror-rebuild", "", "--checkpoint-key", private, "--checkpoint-records", "2")
	m.waitMirrored(time.Minute, tip)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	waitFor(waitCtx, t, "a checkpoint in the mirror", func() (bool, string) {
		cps, err := m.mirror().Checkpoints(waitCtx)
		return err == nil && len(cps) > 0, fmt.Sprintf("%d (%v)", len(cps), err)
	})

	kube := kubeFor(t, env.Admin.Name)
	m.lose()
	m.grant()
	out, _ := mustRun(t, auditor, 1, append([]string{"audit", "verify", "--audit-namespace", m.ns, "--checkpoint-key", public}, m.flags...)...)
	for seq := uint64(1); seq <= tip; seq++ {
		if !strings.Contains(out, "missing-in-cluster: "+audit.RecordName(seq)) {
			t.Errorf("verify --mirror does not name record %d lost with the namespace:\n%s", seq, out)
		}
	}

	_, errOut := mustRun(t, oncall, 1, append([]string{"audit", "restore-log", "--audit-namespace", m.ns, "--yes"}, m.flags...)...)
	if !strings.Contains(errOut, "only a cluster admin") {
		t.Errorf("restore-log by on-call: %s", errOut)
	}
	other := &audit.Record{Event: audit.EventPlanned, Session: "squatter", Actor: audit.Actor{Username: env.Admin.Name},
		Application: &audit.AppRef{Namespace: env.ArgoNamespace, Name: "mirror-squatter"}}
	if err := store.Append(ctx, other); err != nil {
		t.Fatal(err)
	}
	_, errOut = mustRun(t, admin, 1, append([]string{"audit", "restore-log", "--audit-namespace", m.ns, "--yes"}, m.flags...)...)
	if !strings.Contains(errOut, "record 1: the cluster holds other bytes than the mirror; nothing was written") {
		t.Errorf("restore-log over another record 1: %s", errOut)
	}
	if n, err := store.Tip(ctx); err != nil || n != 1 {
		t.Fatalf("the refused restore-log left the log at %d (%v), want the one record there", n, err)
	}
	for _, name := range []string{audit.RecordName(1), audit.HeadName} {
		if err := kube.CoreV1().ConfigMaps(m.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	out, _ = mustRun(t, admin, 0, append([]string{"audit", "restore-log", "--audit-namespace", m.ns, "--yes"}, m.flags...)...)
	if !strings.Contains(out, fmt.Sprintf("restored %d record(s)", tip)) {
		t.Errorf("restore-log: %s", out)
	}
	out, _ = mustRun(t, auditor, 0, append([]string{"audit", "verify", "--audit-namespace", m.ns, "--checkpoint-key", public}, m.flags...)...)
	if !strings.Contains(out, fmt.Sprintf("chain intact: %d records", tip)) || !regexp.MustCompile(`(\d+) checkpoint\(s\), (\d+) signed by a key you passed`).MatchString(out) {
		t.Errorf("verify --mirror after restore-log:\n%s", out)
	}
	out, _ = mustRun(t, auditor, 0, "audit", "verify", "--audit-namespace", m.ns)
	if !strings.Contains(out, fmt.Sprintf("chain intact: %d records", tip)) {
		t.Errorf("verify of the rebuilt log:\n%s", out)
	}
	out, _ = mustRun(t, admin, 0, append([]string{"audit", "restore-log", "--audit-namespace", m.ns, "--yes"}, m.flags...)...)
	if !strings.Contains(out, fmt.Sprintf("restored 0 record(s) from %s into namespace %s (%d were there already)", m.url, m.ns, tip)) {
		t.Errorf("restore-log of a whole log: %s", out)
	}
	report, _ := mustRun(t, auditor, 0, append([]string{"audit", "report", "-o", "json"}, m.flags...)...)
	if !strings.Contains(report, `"source": "mirror `+m.url+`"`) || !strings.Contains(report, "mirror-rebuild") {
		t.Errorf("report --mirror:\n%s", report)
	}

	mustRun(t, oncall, 0, "status", "mirror-rebuild", "--audit-namespace", m.ns)
	mustRun(t, oncall, 0, "restore", "mirror-rebuild", "--force", "--reason", "rebuilt log", "-y", "--audit-namespace", m.ns)
	if !autoSyncOn(syncPolicyOf(t, "mirror-rebuild")) {
		t.Error("restore after restore-log did not turn automated sync back on")
	}
}

// TestVerifyMirrorNamesWhatTheClusterLost: with the log mirrored and
// checkpointed, a record deleted from the cluster is named by verify
// against the mirror (the mirror alone stays intact), a checkpoint
// rewritten in the cluster is named, and one signed by a key the auditor
// did not pass is only unverified.
func TestVerifyMirrorNamesWhatTheClusterLost(t *testing.T) {
	m := newMirror(t, "lost", true)
	ctx := context.Background()
	private, public := checkpointKey(t)
	tip := m.appendRecords(6)
	m.replica("mirror-lost", "", "--checkpoint-key", private, "--checkpoint-records", "3")
	m.waitMirrored(time.Minute, tip)
	kube := kubeFor(t, env.Admin.Name)
	cmName := audit.CheckpointName(tip)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	waitFor(waitCtx, t, "the checkpoint of record "+strconv.FormatUint(tip, 10)+" in the cluster", func() (bool, string) {
		_, err := kube.CoreV1().ConfigMaps(m.ns).Get(waitCtx, cmName, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	auditor := m.user(env.Auditor.Name)
	verify := append([]string{"audit", "verify", "--audit-namespace", m.ns, "--checkpoint-key", public}, m.flags...)
	out, _ := mustRun(t, auditor, 0, verify...)
	if !strings.Contains(out, "signed by a key you passed") {
		t.Errorf("verify --mirror of an intact log:\n%s", out)
	}

	if err := kube.CoreV1().ConfigMaps(m.ns).Delete(ctx, audit.RecordName(3), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	out, _ = mustRun(t, auditor, 1, verify...)
	if !strings.Contains(out, "missing-in-cluster: "+audit.RecordName(3)) {
		t.Errorf("verify --mirror does not name the deleted record:\n%s", out)
	}
	mustRun(t, auditor, 0, append([]string{"audit", "verify", "--mirror-only", "--checkpoint-key", public}, m.flags...)...)

	recreateCheckpoint(t, m.ns, cmName, func(data map[string]string) {
		data["payload"] = strings.Replace(data["payload"], fmt.Sprintf("seq %d\n", tip), fmt.Sprintf("seq %d\n", tip-1), 1)
	})
	out, _ = mustRun(t, auditor, 1, verify...)
	if !strings.Contains(out, "checkpoint-mismatch: configmap/"+cmName) {
		t.Errorf("verify --mirror does not name the rewritten checkpoint:\n%s", out)
	}
	_, stranger := checkpointKey(t)
	out, _ = mustRun(t, auditor, 0, append([]string{"audit", "verify", "--mirror-only", "--checkpoint-key", stranger}, m.flags...)...)
	if !strings.Contains(out, "checkpoint-unverified") {
		t.Errorf("verify with another key does not call the checkpoints unverified:\n%s", out)
	}
}

// bind grants rules in the namespace to subject, as a Role and its binding
// called name.
func (m *mirrorEnv) bind(name string, rules []rbacv1.PolicyRule, subject rbacv1.Subject) {
	t := m.t
	t.Helper()
	ctx := context.Background()
	kube := kubeFor(t, env.Admin.Name)
	if _, err := kube.RbacV1().Roles(m.ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}, Subjects: []rbacv1.Subject{subject}}
	if _, err := kube.RbacV1().RoleBindings(m.ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// session appends, as the admin, a session's plan and, when closed, its
// abort: the records of a session opened and closed, or left open.
func (m *mirrorEnv) session(id string, closed bool) {
	m.t.Helper()
	store := audit.NewConfigMapStore(kubeFor(m.t, env.Admin.Name), m.ns)
	app := &audit.AppRef{Namespace: env.ArgoNamespace, Name: "prune-" + id}
	events := []audit.Event{audit.EventPlanned}
	if closed {
		events = append(events, audit.EventAborted)
	}
	for _, event := range events {
		r := &audit.Record{Event: event, Session: id, Reason: "prune test", Actor: audit.Actor{Username: env.Admin.Name},
			Application: app, Outcome: audit.Outcome{Status: audit.StatusSucceeded}}
		if err := store.Append(context.Background(), r); err != nil {
			m.t.Fatal(err)
		}
	}
}

// waitPrunedThrough waits until the start names record cut and the
// records up to it are gone from the cluster.
func (m *mirrorEnv) waitPrunedThrough(within time.Duration, cut uint64) {
	m.t.Helper()
	store := audit.NewConfigMapStore(kubeFor(m.t, env.Admin.Name), m.ns)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	waitFor(ctx, m.t, fmt.Sprintf("the log pruned through record %d", cut), func() (bool, string) {
		start, err := store.Start(ctx)
		if err != nil || start == nil {
			return false, fmt.Sprintf("no start (%v)", err)
		}
		c, err := audit.ParseCheckpoint(start.Payload)
		if err != nil || c.Seq != cut {
			return false, fmt.Sprintf("start %+v (%v)", c, err)
		}
		for seq := uint64(1); seq <= cut; seq++ {
			if _, held, err := store.StoredRecord(ctx, seq); err != nil || held {
				return false, fmt.Sprintf("record %d still there (%v)", seq, err)
			}
		}
		return true, ""
	})
}

// TestPruneOnlyUnderLockAndACheckpoint: with --prune-after, the
// controller prunes the closed sessions' old records from the cluster
// once the mirror holds them under lock, signing a checkpoint at the cut,
// but never an open session's (nor anything after it) until it closes.
// verify with the public key is intact across the cut, and names it
// cut-unverified without one; verify against the mirror counts the
// records pruned, not lost; an append after the cut links to the log's
// end. On-call, even with RBAC to delete and update ConfigMaps there, is
// refused by the admission policy a record's delete and a checkpoint of
// their own; a cluster admin's truncation by hand, past the cut, is
// named by verify.
func TestPruneOnlyUnderLockAndACheckpoint(t *testing.T) {
	m := newMirror(t, "prune", true)
	ctx := context.Background()
	private, public := checkpointKey(t)
	m.session("closed-a", true) // records 1, 2
	m.session("closed-b", true) // 3, 4
	m.session("open", false)    // 5
	m.session("closed-c", true) // 6, 7
	m.session("closed-d", true) // 8, 9
	r := m.replica("mirror-prune", "", "--mirror-retention", "1h", "--checkpoint-key", private,
		"--checkpoint-interval", "1s", "--prune-after", "1s")
	m.waitPrunedThrough(time.Minute, 4)

	mirror := m.mirror()
	for seq := uint64(1); seq <= 9; seq++ {
		lock, err := m.s3.Client().GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: aws.String(m.bucket), Key: aws.String(mirror.RecordKey(seq))})
		if err != nil || lock.Retention == nil || lock.Retention.Mode != s3types.ObjectLockRetentionModeCompliance {
			t.Errorf("record %d in the mirror: %+v (%v), want locked in compliance mode", seq, lock, err)
		}
	}
	cp, err := mirror.Checkpoint(ctx, 4)
	if err != nil || cp == nil {
		t.Fatalf("the cut's checkpoint in the mirror: %v (%v)", cp, err)
	}
	store := audit.NewConfigMapStore(kubeFor(t, env.Admin.Name), m.ns)
	for seq := uint64(5); seq <= 9; seq++ {
		if _, held, err := store.StoredRecord(ctx, seq); err != nil || !held {
			t.Errorf("record %d, at or after the open session's plan, was pruned (%v)", seq, err)
		}
	}

	oncall, auditor, admin := m.user(env.Oncall.Name), m.user(env.Auditor.Name), m.user(env.Admin.Name)
	out, _ := mustRun(t, auditor, 0, "audit", "verify", "--audit-namespace", m.ns, "--checkpoint-key", public)
	if !strings.Contains(out, "pruned through record 4") || !strings.Contains(out, "chain intact: 5 records, newest 9") {
		t.Errorf("verify of the pruned log with the key:\n%s", out)
	}
	out, _ = mustRun(t, auditor, 1, "audit", "verify", "--audit-namespace", m.ns)
	if !strings.Contains(out, "cut-unverified: configmap/"+audit.StartName) {
		t.Errorf("verify of the pruned log without a key:\n%s", out)
	}
	out, _ = mustRun(t, auditor, 0, append([]string{"audit", "verify", "--audit-namespace", m.ns, "--checkpoint-key", public}, m.flags...)...)
	if strings.Contains(out, "missing-in-cluster") || !strings.Contains(out, "chain intact: 9 records") {
		t.Errorf("verify --mirror of the pruned log:\n%s", out)
	}

	// Status shows where the mirror stands, as the leader published it.
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	waitFor(waitCtx, t, "status to show the mirror caught up and pruned", func() (bool, string) {
		_, errOut := mustRun(t, oncall, 0, "status", "--audit-namespace", m.ns)
		return strings.Contains(errOut, "mirror "+m.url+": caught up at record 9") && strings.Contains(errOut, "records up to 4 pruned from the cluster") &&
			strings.Contains(errOut, "published by mirror-prune"), errOut
	})

	// On-call, given more RBAC than deploy/rbac grants, is still refused
	// by the admission policy.
	m.bind("oncall-overreach", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"update", "patch", "delete", "create"}}},
		rbacv1.Subject{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: env.Oncall.Groups[0]})
	for _, attempt := range []struct {
		args []string
		want string
	}{
		{[]string{"delete", "configmap", audit.RecordName(5)}, "the audit log is append-only"},
		{[]string{"delete", "configmap", audit.StartName}, "checkpoints and the mirror state belong to the kubectl gitops controller"},
		{[]string{"annotate", "configmap", audit.StartName, "x=y"}, "checkpoints and the mirror state belong to the kubectl gitops controller"},
		{[]string{"create", "configmap", audit.CheckpointName(8), "--from-literal=payload=forged", "--from-literal=signature=forged"}, "checkpoints and the mirror state belong to the kubectl gitops controller"},
	} {
		var refused string
		waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		waitFor(waitCtx, t, "on-call's "+strings.Join(attempt.args, " ")+" to be refused by the policy", func() (bool, string) {
			_, errOut, code := oncall.run("kubectl", append([]string{"-n", m.ns}, attempt.args...)...)
			refused = errOut
			// RBAC takes a moment to allow it; then the policy refuses.
			return code != 0 && strings.Contains(errOut, attempt.want), errOut
		})
		cancel()
		t.Logf("on-call: kubectl %s: %s", strings.Join(attempt.args, " "), strings.TrimSpace(refused))
	}

	// The controller's token deletes records and nothing else: not the
	// head, not a checkpoint, not any other ConfigMap.
	admin.kubectl("-n", m.ns, "create", "configmap", "someone-elses")
	ctrl := &user{t: t, env: []string{"HOME=" + t.TempDir(), "KUBECONFIG=" + controllerKubeconfig(t), "PATH=" + os.Getenv("PATH")}}
	for name, want := range map[string]string{
		audit.HeadName:          "may not delete " + audit.HeadName,
		audit.CheckpointName(4): "deletes none",
		"someone-elses":         "deletes only audit records it pruned",
	} {
		_, errOut, code := ctrl.run("kubectl", "-n", m.ns, "delete", "configmap", name)
		if code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("the controller's delete of %s: exit %d, %s; want refused by the policy: %s", name, code, errOut, want)
		}
	}

	// Closing the open session frees its records, up to the next open
	// session's plan (the cut never splits a session, nor takes the newest
	// record).
	closeOpen := &audit.Record{Event: audit.EventAborted, Session: "open", Reason: "prune test", Actor: audit.Actor{Username: env.Admin.Name},
		Application: &audit.AppRef{Namespace: env.ArgoNamespace, Name: "prune-open"}, Outcome: audit.Outcome{Status: audit.StatusSucceeded}}
	if err := store.Append(ctx, closeOpen); err != nil || closeOpen.Seq != 10 {
		t.Fatalf("closing the open session: record %d (%v), want 10", closeOpen.Seq, err)
	}
	m.session("open-2", false) // 11
	m.waitPrunedThrough(time.Minute, 10)
	after := &audit.Record{Event: audit.EventPlanned, Session: "after", Actor: audit.Actor{Username: env.Oncall.Name},
		Application: &audit.AppRef{Namespace: env.ArgoNamespace, Name: "prune-after"}, Outcome: audit.Outcome{Status: audit.StatusStarted}}
	if err := audit.NewConfigMapStore(kubeFor(t, env.Oncall.Name), m.ns).Append(ctx, after); err != nil || after.Seq != 12 {
		t.Fatalf("an append after the cut: record %d (%v), want 12", after.Seq, err)
	}
	out, _ = mustRun(t, auditor, 0, "audit", "verify", "--audit-namespace", m.ns, "--checkpoint-key", public)
	if !strings.Contains(out, "pruned through record 10") || !strings.Contains(out, "chain intact: 2 records, newest 12") {
		t.Errorf("verify after the second cut:\n%s", out)
	}
	if got := metricValue(r.metrics(t), "kubectl_gitops_audit_pruned_through_record"); got != "10" {
		t.Errorf("kubectl_gitops_audit_pruned_through_record %q, want 10", got)
	}

	// A cluster admin deletes the first record kept (an open session's
	// plan, which the controller keeps): no checkpoint covers that cut.
	admin.kubectl("-n", m.ns, "delete", "configmap", audit.RecordName(11))
	out, _ = mustRun(t, auditor, 1, "audit", "verify", "--audit-namespace", m.ns, "--checkpoint-key", public)
	if !strings.Contains(out, "missing: record 11") {
		t.Errorf("verify does not name the record deleted by hand past the cut:\n%s", out)
	}
}

// TestCheckpointsTimestampedByATSA: with --tsa the controller has each
// checkpoint timestamped by an RFC 3161 authority (sigstore's, in the
// environment); verify --mirror checks the token against the checkpoint
// and the authority's root the auditor passes, calls it unverified without
// that root, and names a checkpoint whose token covers another text or
// chains to an authority the auditor does not trust.
func TestCheckpointsTimestampedByATSA(t *testing.T) {
	m := newMirror(t, "tsa", true)
	ctx := context.Background()
	tsa, err := testEnv.TSA(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	roots := filepath.Join(dir, "tsa-chain.pem")
	if err := os.WriteFile(roots, tsa.Chain, 0o600); err != nil {
		t.Fatal(err)
	}
	private, public := checkpointKey(t)
	tip := m.appendRecords(3)
	m.replica("mirror-tsa", "", "--checkpoint-key", private, "--checkpoint-records", "3", "--tsa", tsa.URL)
	m.waitMirrored(time.Minute, tip)
	kube := kubeFor(t, env.Admin.Name)
	cmName := audit.CheckpointName(tip)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	waitFor(waitCtx, t, "the timestamped checkpoint of record "+strconv.FormatUint(tip, 10)+" in the cluster", func() (bool, string) {
		cm, err := kube.CoreV1().ConfigMaps(m.ns).Get(waitCtx, cmName, metav1.GetOptions{})
		return err == nil && cm.Data["timestamp"] != "", fmt.Sprint(err)
	})
	auditor := m.user(env.Auditor.Name)
	mirrorOnly := append([]string{"audit", "verify", "--mirror-only", "--checkpoint-key", public}, m.flags...)
	if out, _ := mustRun(t, auditor, 0, append(mirrorOnly, "--tsa-certs", roots)...); !strings.Contains(out, "1 checkpoint(s) timestamped by a timestamp authority of --tsa-certs") {
		t.Errorf("verify --tsa-certs of a timestamped checkpoint:\n%s", out)
	}
	if out, _ := mustRun(t, auditor, 0, mirrorOnly...); !strings.Contains(out, "which was not checked against --tsa-certs: unverified") {
		t.Errorf("verify without --tsa-certs:\n%s", out)
	}
	stranger := filepath.Join(dir, "stranger.pem")
	if err := os.WriteFile(stranger, selfSignedPEM(t), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _ := mustRun(t, auditor, 1, append(mirrorOnly, "--tsa-certs", stranger)...); !strings.Contains(out, "is not a timestamp authority of --tsa-certs") {
		t.Errorf("verify against another authority's root:\n%s", out)
	}

	// The cluster's copy, recreated by an admin with a genuine token of
	// the same authority over another text: named, against the mirror.
	other, err := (&audit.TSA{URL: tsa.URL}).Timestamp(ctx, []byte("kubectl-gitops checkpoint v1\nseq 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	recreateCheckpoint(t, m.ns, cmName, func(data map[string]string) { data["timestamp"] = base64.StdEncoding.EncodeToString(other) })
	verify := append([]string{"audit", "verify", "--audit-namespace", m.ns, "--checkpoint-key", public, "--tsa-certs", roots}, m.flags...)
	if out, _ := mustRun(t, auditor, 1, verify...); !strings.Contains(out, "configmap/"+cmName) || !strings.Contains(out, "covers another text than this checkpoint") {
		t.Errorf("verify --mirror does not name the cluster checkpoint's swapped timestamp:\n%s", out)
	}
}

// selfSignedPEM is a root certificate of nobody the auditor should trust.
func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "stranger"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// recreateCheckpoint replaces checkpoint ConfigMap name of namespace ns,
// as a cluster admin may (it is immutable: deleted, then created again),
// with its data changed by edit.
func recreateCheckpoint(t *testing.T, ns, name string, edit func(data map[string]string)) {
	t.Helper()
	ctx := context.Background()
	cms := kubeFor(t, env.Admin.Name).CoreV1().ConfigMaps(ns)
	cp, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	forged := cp.DeepCopy()
	forged.ResourceVersion, forged.UID = "", ""
	edit(forged.Data)
	if _, err := cms.Create(ctx, forged, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
