//go:build e2e

// The shipped admission policies allow the break-glass group only the
// transitions kubectl gitops makes (docs/design.md §6, DESIGN.md §11). Each
// test below tries one move the tool never makes, through the real kubectl as
// the on-call user, and checks that the API server refuses it with the
// policy's message and that the object is as it was. The moves the tool does
// make are proven by the break-glass, restore, parent, debt and terminate
// tests, which run through the same policies.

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// The policies' messages, as far as the tests rely on them.
const (
	refusedSyncPolicy = "only to pause it"
	refusedPhase      = "may change only status.operationState.phase of application"
	refusedImmutable  = "the audit head stays mutable"
	refusedHeadMeta   = "an update of the audit head may change only data.seq and data.hash"
	refusedHeadData   = "the audit head holds only data.seq (a decimal number) and data.hash"
)

// manualPolicy keeps an Application on manual sync: no automated.
var manualPolicy = map[string]any{"syncOptions": []any{"Validate=true"}}

// manualApp creates, as the cluster admin, an Application name in namespace
// kept on manual sync. Argo CD never syncs it, so nothing but the tests
// changes its spec or metadata.
func manualApp(t *testing.T, namespace, name string) {
	t.Helper()
	e := environment(t)
	ctx := context.Background()
	app := e.Application(name, "apps/"+name, name, runtimeCopy(manualPolicy))
	app.SetNamespace(namespace)
	apps := kubeDynamic(t).Resource(argocd.ApplicationGVR).Namespace(namespace)
	if _, err := apps.Create(ctx, app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = apps.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// appState is what no refused write may change on an Application: spec,
// labels, annotations (but the refresh requests Argo CD's controller
// removes), finalizers, owners, operation and the operation's phase.
func appState(t *testing.T, namespace, name string) map[string]any {
	t.Helper()
	a, err := kubeDynamic(t).Resource(argocd.ApplicationGVR).Namespace(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	annotations := map[string]string{}
	for k, v := range a.GetAnnotations() {
		if !strings.HasPrefix(k, argocd.RefreshAnnotation) && !strings.HasPrefix(k, argocd.HydrateAnnotation) {
			annotations[k] = v
		}
	}
	phase, _, _ := unstructured.NestedString(a.Object, "status", "operationState", "phase")
	return map[string]any{
		"spec": a.Object["spec"], "labels": a.GetLabels(), "annotations": annotations,
		"finalizers": a.GetFinalizers(), "ownerReferences": a.GetOwnerReferences(),
		"operation": a.Object["operation"], "phase": phase,
	}
}

// refusedApp patches Application namespace/name as u with the merge patch
// body and fails unless the API server refuses it with want and the
// Application is unchanged.
func refusedApp(t *testing.T, u *user, namespace, name, what, want string, body any) {
	t.Helper()
	before := appState(t, namespace, name)
	patch, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	_, errOut, code := u.run("kubectl", "-n", namespace, "patch", "application", name, "--type=merge", "-p", string(patch))
	if code == 0 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "kubectl-gitops-breakglass-applications") {
		t.Errorf("%s: exit %d, %q; want refused by the Application policy with %q", what, code, errOut, want)
	}
	if after := appState(t, namespace, name); !reflect.DeepEqual(runtimeDeepCopy(before), runtimeDeepCopy(after)) {
		t.Errorf("%s changed application %s/%s:\nbefore %v\nafter  %v", what, namespace, name, before, after)
	}
}

func syncPolicyPatch(policy map[string]any) map[string]any {
	return map[string]any{"spec": map[string]any{"syncPolicy": policy}}
}

// TestTransitionArmingAutomatedOnAManualApplicationIsRefused: outside a
// session, turning on automated sync with prune and self-heal on an
// Application kept on manual sync would let Git delete resources with no
// break-glass in sight.
func TestTransitionArmingAutomatedOnAManualApplicationIsRefused(t *testing.T) {
	core(t)
	apiOnly(t)
	e := environment(t)
	manualApp(t, e.ArgoNamespace, "tx-arm")
	refusedApp(t, newUser(t, env.Oncall.Name), e.ArgoNamespace, "tx-arm", "arming automated {prune, selfHeal}", refusedSyncPolicy,
		syncPolicyPatch(map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}}))
}

// TestTransitionReplaceAndForceSyncOptionsAreRefused: Replace=true and
// Force=true make the next sync delete and recreate resources.
func TestTransitionReplaceAndForceSyncOptionsAreRefused(t *testing.T) {
	core(t)
	apiOnly(t)
	e := environment(t)
	manualApp(t, e.ArgoNamespace, "tx-options")
	refusedApp(t, newUser(t, env.Oncall.Name), e.ArgoNamespace, "tx-options", "adding syncOptions Replace=true, Force=true", refusedSyncPolicy,
		syncPolicyPatch(map[string]any{"syncOptions": []any{"Validate=true", "Replace=true", "Force=true"}}))
}

// TestTransitionPrivilegedManagedNamespaceIsRefused: managedNamespaceMetadata
// with CreateNamespace=true would have Argo CD label the destination
// namespace to run privileged pods.
func TestTransitionPrivilegedManagedNamespaceIsRefused(t *testing.T) {
	core(t)
	apiOnly(t)
	e := environment(t)
	manualApp(t, e.ArgoNamespace, "tx-namespace")
	refusedApp(t, newUser(t, env.Oncall.Name), e.ArgoNamespace, "tx-namespace", "adding a privileged managedNamespaceMetadata", refusedSyncPolicy,
		syncPolicyPatch(map[string]any{
			"syncOptions":              []any{"Validate=true", "CreateNamespace=true"},
			"managedNamespaceMetadata": map[string]any{"labels": map[string]any{"pod-security.kubernetes.io/enforce": "privileged"}},
		}))
}

// TestTransitionSelfHealFlipInASessionIsRefused: an open session lets the
// tool pause, not rewrite the policy restore will bring back: flipping
// selfHeal is refused, alone or with a session write as the tool makes it.
func TestTransitionSelfHealFlipInASessionIsRefused(t *testing.T) {
	core(t)
	e := environment(t)
	deployApp(t, "tx-selfheal")
	oncall := newUser(t, env.Oncall.Name)
	mustRun(t, oncall, 0, "breakglass", "tx-selfheal", "deployment/web", "--replicas", "3", "--reason", "transition test", "-y")
	flip := map[string]any{"automated": map[string]any{"selfHeal": false}}
	refusedApp(t, oncall, e.ArgoNamespace, "tx-selfheal", "flipping selfHeal in a session", refusedSyncPolicy, syncPolicyPatch(flip))

	session, err := json.Marshal(sessionOf(t, "tx-selfheal"))
	if err != nil {
		t.Fatal(err)
	}
	withSession := syncPolicyPatch(flip)
	withSession["metadata"] = map[string]any{"annotations": map[string]any{breakglass.SessionAnnotation: string(session)}}
	refusedApp(t, oncall, e.ArgoNamespace, "tx-selfheal", "flipping selfHeal with a session write", refusedSyncPolicy, withSession)

	mustRun(t, oncall, 0, "restore", "tx-selfheal", "--force", "--reason", "transition test over", "-y")
	if got := syncPolicyOf(t, "tx-selfheal"); !reflect.DeepEqual(runtimeDeepCopy(got), runtimeDeepCopy(fullPolicy)) {
		t.Errorf("restore brought back %v, want %v", got, fullPolicy)
	}
}

// TestTransitionPausedSessionMovesPass: a session's moves on an Application
// with automated sync, written with kubectl in the form the tool writes
// them, pass: the pause with the session, the hold's ignoreDifferences
// entry and sync option within it, the close with the unpause and the
// last-session mark. On the paused Application, flipping selfHeal,
// dropping the session and a hold entry of another form are refused. The
// break-glass, hold and restore tests prove the tool's own writes where
// Argo CD runs; this test proves the policy's rules for them on every
// Kubernetes release, with no Argo CD process. Argo CD 3.x's form (the
// pause sets automated.enabled: false): not of the core loop.
func TestTransitionPausedSessionMovesPass(t *testing.T) {
	apiOnly(t)
	e := environment(t)
	const name = "tx-paused"
	ctx := context.Background()
	// A path Git does not hold: Argo CD, where it runs, compares and
	// never syncs.
	app := e.Application(name, "apps/"+name, name, runtimeCopy(fullPolicy))
	apps := appsClient(t)
	if _, err := apps.Create(ctx, app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = apps.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	oncall := newUser(t, env.Oncall.Name)
	patch := func(body map[string]any) {
		t.Helper()
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		oncall.kubectl("-n", e.ArgoNamespace, "patch", "application", name, "--type=merge", "-p", string(data))
	}
	session := func(s breakglass.Session) map[string]any {
		value, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return map[string]any{"annotations": map[string]any{breakglass.SessionAnnotation: string(value)}}
	}
	opened := breakglass.Session{ID: name + "-1", State: breakglass.StatePaused, OpenedBy: env.Oncall.Name, SavedSyncPolicy: mustJSON(fullPolicy)}
	options := fullPolicy["syncOptions"].([]any)

	patch(map[string]any{"metadata": session(opened), "spec": map[string]any{"syncPolicy": map[string]any{"automated": map[string]any{"enabled": false}}}})
	if got := syncPolicyOf(t, name); !reflect.DeepEqual(runtimeDeepCopy(got), runtimeDeepCopy(pausedFullPolicy())) {
		t.Fatalf("after the pause the sync policy is %v, want %v", got, pausedFullPolicy())
	}
	refusedApp(t, oncall, e.ArgoNamespace, name, "flipping selfHeal on the paused application", refusedSyncPolicy,
		syncPolicyPatch(map[string]any{"automated": map[string]any{"selfHeal": false}}))
	refusedApp(t, oncall, e.ArgoNamespace, name, "dropping the session of the paused application", "its break-glass session comes only with the pause",
		map[string]any{"metadata": map[string]any{"annotations": map[string]any{breakglass.SessionAnnotation: nil}}})
	entry := map[string]any{"group": "apps", "kind": "Deployment", "name": "web", "namespace": name, "jqPathExpressions": []any{
		".spec.replicas", `.spec.template.spec.containers[] | select(.name == "web") | .image`, `.metadata.annotations["example.com/owner"]`}}
	refusedApp(t, oncall, e.ArgoNamespace, name, "a hold entry by JSON pointer", "only to hold the patched fields of its open session",
		map[string]any{"spec": map[string]any{"ignoreDifferences": []any{map[string]any{"kind": "Deployment", "name": "web", "jsonPointers": []any{"/spec/replicas"}}}}})
	// Entries Argo CD reads as "ignore all of it": a glob group or kind
	// with an empty name and a whole spec ignored every spec of the
	// Application; each piece alone is refused too.
	for what, bad := range map[string]map[string]any{
		"a hold entry of every kind and spec": {"group": "*", "kind": "*", "name": "", "jqPathExpressions": []any{".spec"}},
		"a hold entry of a glob kind":         {"group": "apps", "kind": "*", "name": "web", "jqPathExpressions": []any{".spec.replicas"}},
		"a hold entry of a glob group":        {"group": "*", "kind": "Deployment", "name": "web", "jqPathExpressions": []any{".spec.replicas"}},
		"a hold entry of an empty name":       {"group": "apps", "kind": "Deployment", "name": "", "jqPathExpressions": []any{".spec.replicas"}},
		"a hold entry of a glob name":         {"group": "apps", "kind": "Deployment", "name": "web-*", "jqPathExpressions": []any{".spec.replicas"}},
		"a hold entry of a whole spec":        {"group": "apps", "kind": "Deployment", "name": "web", "jqPathExpressions": []any{".spec"}},
		"a hold entry of recursive jq":        {"group": "apps", "kind": "Deployment", "name": "web", "jqPathExpressions": []any{".spec | .."}},
	} {
		refusedApp(t, oncall, e.ArgoNamespace, name, what, "only to hold the patched fields of its open session",
			map[string]any{"spec": map[string]any{"ignoreDifferences": []any{bad}}})
	}

	held := opened
	held.Hold = breakglass.HoldApp
	patch(map[string]any{"metadata": session(held), "spec": map[string]any{
		"ignoreDifferences": []any{entry},
		"syncPolicy":        map[string]any{"syncOptions": append(append([]any{}, options...), breakglass.RespectIgnoreDifferences)},
	}})

	patch(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{
			breakglass.SessionAnnotation:     nil,
			breakglass.LastSessionAnnotation: `{"id":"` + opened.ID + `","closed":"restored"}`,
		}},
		"spec": map[string]any{"ignoreDifferences": nil, "syncPolicy": map[string]any{"automated": map[string]any{"enabled": nil}, "syncOptions": options}},
	})
	if got := syncPolicyOf(t, name); !reflect.DeepEqual(runtimeDeepCopy(got), runtimeDeepCopy(fullPolicy)) {
		t.Errorf("after the close the sync policy is %v, want %v", got, fullPolicy)
	}
}

// TestTransitionSilentPauseByPhaseIsRefused: writing a phase on an
// Application with no running operation (Failed over a finished sync)
// would stop Argo CD from acting on it with no session and no record;
// neither outside a session nor in one is it a move the tool makes.
func TestTransitionSilentPauseByPhaseIsRefused(t *testing.T) {
	core(t)
	e := environment(t)
	app := deployApp(t, "tx-phase")
	if _, hasOp := app.Object["operation"]; hasOp {
		t.Fatalf("the application still runs an operation: %v", app.Object["operation"])
	}
	oncall := newUser(t, env.Oncall.Name)
	failed := map[string]any{"status": map[string]any{"operationState": map[string]any{"phase": "Failed"}}}
	refusedApp(t, oncall, e.ArgoNamespace, "tx-phase", "phase Failed with no operation", refusedPhase, failed)

	mustRun(t, oncall, 0, "breakglass", "tx-phase", "deployment/web", "--replicas", "3", "--reason", "transition test", "-y")
	refusedApp(t, oncall, e.ArgoNamespace, "tx-phase", "phase Failed in a session, with no operation", refusedPhase, failed)
	refusedApp(t, oncall, e.ArgoNamespace, "tx-phase", "phase Terminating in a session, with no operation", refusedPhase,
		map[string]any{"status": map[string]any{"operationState": map[string]any{"phase": "Terminating"}}})
	mustRun(t, oncall, 0, "restore", "tx-phase", "--force", "--reason", "transition test over", "-y")
}

// TestTransitionSessionOfAnotherFormIsRefused: the policy tells sessions
// apart by the id the tool writes first; an annotation that does not start
// so could carry any id a reader picks.
func TestTransitionSessionOfAnotherFormIsRefused(t *testing.T) {
	core(t)
	apiOnly(t)
	e := environment(t)
	manualApp(t, e.ArgoNamespace, "tx-form")
	refusedApp(t, newUser(t, env.Oncall.Name), e.ArgoNamespace, "tx-form", "a session annotation not starting with its id",
		"must be a session as kubectl gitops writes it",
		map[string]any{"metadata": map[string]any{"annotations": map[string]any{breakglass.SessionAnnotation: `{"state":"paused","id":"tx-form-1"}`}}})
}

// TestTransitionSessionIDChangeIsRefused: swapping the id of an open
// session would close one session and open another in one write, keeping a
// pause no record of the new session explains.
func TestTransitionSessionIDChangeIsRefused(t *testing.T) {
	core(t)
	apiOnly(t)
	e := environment(t)
	manualApp(t, e.ArgoNamespace, "tx-id")
	oncall := newUser(t, env.Oncall.Name)
	oncall.kubectl("-n", e.ArgoNamespace, "annotate", "application", "tx-id", breakglass.SessionAnnotation+`={"id":"tx-id-1","state":"paused"}`)
	refusedApp(t, oncall, e.ArgoNamespace, "tx-id", "changing the session's id", "keeps its id",
		map[string]any{"metadata": map[string]any{"annotations": map[string]any{breakglass.SessionAnnotation: `{"id":"tx-id-2","state":"paused"}`}}})
}

// TestTransitionPausedByMarkWithoutAPauseIsRefused: the paused-by mark
// goes with a parent's pause; set alone, its removal could later turn on
// an automated sync that was never paused.
func TestTransitionPausedByMarkWithoutAPauseIsRefused(t *testing.T) {
	core(t)
	apiOnly(t)
	e := environment(t)
	manualApp(t, e.ArgoNamespace, "tx-mark")
	refusedApp(t, newUser(t, env.Oncall.Name), e.ArgoNamespace, "tx-mark", "a paused-by mark with no pause", "paused-by mark of application",
		map[string]any{"metadata": map[string]any{"annotations": map[string]any{breakglass.PausedByAnnotation: "child/20261203-000000-abcde"}}})
}

// TestTransitionLastSessionMarkOnlyWithItsClose: the last-session mark is
// what Argo CD's notifications announce a close by. Were it free, on-call
// could announce a close that never happened, or hide one by closing
// without it or removing it: every close sets it, naming the session that
// closes, in the form the tool writes, and nothing else changes it.
func TestTransitionLastSessionMarkOnlyWithItsClose(t *testing.T) {
	core(t)
	apiOnly(t)
	e := environment(t)
	manualApp(t, e.ArgoNamespace, "tx-last")
	oncall := newUser(t, env.Oncall.Name)
	const refusedLast = "last-session mark of application"
	mark := func(id, closed string) string { return `{"id":"` + id + `","closed":"` + closed + `"}` }
	annotations := func(a map[string]any) map[string]any {
		return map[string]any{"metadata": map[string]any{"annotations": a}}
	}
	refusedApp(t, oncall, e.ArgoNamespace, "tx-last", "a last-session mark with no session closing", refusedLast,
		annotations(map[string]any{breakglass.LastSessionAnnotation: mark("tx-last-0", "restored")}))

	oncall.kubectl("-n", e.ArgoNamespace, "annotate", "application", "tx-last", breakglass.SessionAnnotation+`={"id":"tx-last-1","state":"pausing"}`)
	refusedApp(t, oncall, e.ArgoNamespace, "tx-last", "a last-session mark beside the open session", refusedLast,
		annotations(map[string]any{breakglass.LastSessionAnnotation: mark("tx-last-1", "restored")}))
	refusedApp(t, oncall, e.ArgoNamespace, "tx-last", "a close without the mark", refusedLast,
		annotations(map[string]any{breakglass.SessionAnnotation: nil}))
	refusedApp(t, oncall, e.ArgoNamespace, "tx-last", "a close naming another session", refusedLast,
		annotations(map[string]any{breakglass.SessionAnnotation: nil, breakglass.LastSessionAnnotation: mark("tx-last-9", "restored")}))
	refusedApp(t, oncall, e.ArgoNamespace, "tx-last", "a close with a mark of another form", refusedLast,
		annotations(map[string]any{breakglass.SessionAnnotation: nil, breakglass.LastSessionAnnotation: `{"id":"tx-last-1","closed":"restored","by":"someone"}`}))
	refusedApp(t, oncall, e.ArgoNamespace, "tx-last", "a close with a word the tool never writes", refusedLast,
		annotations(map[string]any{breakglass.SessionAnnotation: nil, breakglass.LastSessionAnnotation: mark("tx-last-1", "approved")}))
	// The close as the tool writes it passes.
	body, _ := json.Marshal(annotations(map[string]any{breakglass.SessionAnnotation: nil, breakglass.LastSessionAnnotation: mark("tx-last-1", "aborted")}))
	oncall.kubectl("-n", e.ArgoNamespace, "patch", "application", "tx-last", "--type=merge", "-p", string(body))

	refusedApp(t, oncall, e.ArgoNamespace, "tx-last", "removing the last-session mark", refusedLast,
		annotations(map[string]any{breakglass.LastSessionAnnotation: nil}))
	refusedApp(t, oncall, e.ArgoNamespace, "tx-last", "rewriting the last-session mark to restored", refusedLast,
		annotations(map[string]any{breakglass.LastSessionAnnotation: mark("tx-last-1", "restored")}))
}

// TestTransitionTeamNamespaceApplicationIsRefusedAlike: an Application in a
// team namespace (Applications in any namespace) is guarded as one in
// Argo CD's own namespace, while the moves the tool makes still pass there.
func TestTransitionTeamNamespaceApplicationIsRefusedAlike(t *testing.T) {
	core(t)
	apiOnly(t)
	environment(t)
	const ns, name = "team-transitions", "tx-team"
	if err := env.TeamNamespace(context.Background(), kubeFor(t, env.Admin.Name), ns); err != nil {
		t.Fatal(err)
	}
	manualApp(t, ns, name)
	oncall := newUser(t, env.Oncall.Name)
	refusedApp(t, oncall, ns, name, "arming automated in a team namespace", refusedSyncPolicy,
		syncPolicyPatch(map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}}))
	refusedApp(t, oncall, ns, name, "adding Replace/Force in a team namespace", refusedSyncPolicy,
		syncPolicyPatch(map[string]any{"syncOptions": []any{"Replace=true", "Force=true"}}))
	refusedApp(t, oncall, ns, name, "repointing the source in a team namespace", "may change only spec.syncPolicy",
		map[string]any{"spec": map[string]any{"source": map[string]any{"path": "elsewhere"}}})
	// A finished sync, as Argo CD records it, for the phase to be written over.
	finished := fmt.Sprintf(`{"status":{"operationState":{"phase":"Succeeded","startedAt":%[1]q,"finishedAt":%[1]q,"operation":{"sync":{"revision":"HEAD"}}}}}`,
		time.Now().UTC().Format(time.RFC3339))
	newUser(t, env.Admin.Name).kubectl("-n", ns, "patch", "application", name, "--type=merge", "-p", finished)
	refusedApp(t, oncall, ns, name, "a phase in a team namespace", refusedPhase,
		map[string]any{"status": map[string]any{"operationState": map[string]any{"phase": "Failed"}}})

	// What the tool writes there passes: a refresh request, and a session
	// opened and closed on an unpaused (manual) policy.
	oncall.kubectl("-n", ns, "annotate", "application", name, argocd.RefreshAnnotation+"=normal", "--overwrite")
	oncall.kubectl("-n", ns, "annotate", "application", name, breakglass.SessionAnnotation+`={"id":"tx-team-1","state":"pausing"}`)
	oncall.kubectl("-n", ns, "patch", "application", name, "--type=merge", "-p",
		`{"metadata":{"annotations":{"`+breakglass.SessionAnnotation+`":null,"`+breakglass.LastSessionAnnotation+`":"{\"id\":\"tx-team-1\",\"closed\":\"aborted\"}"}}}`)
}

// auditNamespace starts an audit log of its own in a new namespace, as
// --audit-namespace would: the on-call group gets the shipped audit-writer
// rights there and appends two records (creating the head as the tool does).
// The shared log of the Applications' namespace is never touched.
func auditNamespace(t *testing.T, name string) string {
	t.Helper()
	environment(t)
	ctx := context.Background()
	kube := kubeFor(t, env.Admin.Name)
	ns := "tx-audit-" + name
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "audit-writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{audit.HeadName}, Verbs: []string{"update", "patch"}},
	}}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "audit-writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "audit-writer"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: env.Oncall.Groups[0]}},
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	store := audit.NewConfigMapStore(kubeFor(t, env.Oncall.Name), ns)
	// The API server's authorizer learns of the new binding from a watch:
	// the first append may come before it has.
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	waitFor(waitCtx, t, "the audit-writer binding in "+ns+" to take effect", func() (bool, string) {
		_, err := kubeFor(t, env.Oncall.Name).CoreV1().ConfigMaps(ns).List(waitCtx, metav1.ListOptions{Limit: 1})
		return err == nil, fmt.Sprint(err)
	})
	for i := 1; i <= 2; i++ {
		r := &audit.Record{Event: audit.EventPatched, Actor: audit.Actor{Username: env.Oncall.Name}, Reason: fmt.Sprintf("transition %d", i),
			Outcome: audit.Outcome{Status: audit.StatusSucceeded}}
		if err := store.Append(ctx, r); err != nil {
			t.Fatalf("appending as oncall in %s: %v", ns, err)
		}
	}
	return ns
}

// headState is the head ConfigMap as no refused write may change it; nil
// when there is none.
func headState(t *testing.T, ns string) map[string]any {
	t.Helper()
	cm, err := kubeFor(t, env.Admin.Name).CoreV1().ConfigMaps(ns).Get(context.Background(), audit.HeadName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{
		"data": cm.Data, "binaryData": cm.BinaryData, "immutable": cm.Immutable, "labels": cm.Labels,
		"annotations": cm.Annotations, "ownerReferences": cm.OwnerReferences, "finalizers": cm.Finalizers,
	}
}

// refusedHead runs kubectl args as the on-call user in ns and fails unless
// the API server refuses it with want, the head is unchanged and the log
// there still verifies.
func refusedHead(t *testing.T, ns, what, want string, args ...string) {
	t.Helper()
	oncall := newUser(t, env.Oncall.Name)
	before := headState(t, ns)
	_, errOut, code := oncall.run("kubectl", append([]string{"-n", ns}, args...)...)
	if code == 0 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "kubectl-gitops-audit-log") {
		t.Errorf("%s: exit %d, %q; want refused by the audit-log policy with %q", what, code, errOut, want)
	}
	if after := headState(t, ns); !reflect.DeepEqual(before, after) {
		t.Errorf("%s changed the head:\nbefore %v\nafter  %v", what, before, after)
	}
	if out, errOut, code := oncall.run("kubectl", "gitops", "audit", "verify", "--audit-namespace", ns); code != 0 {
		t.Errorf("audit verify after %s: exit %d: %s %s", what, code, out, errOut)
	}
}

// TestTransitionImmutableHeadIsRefused: an immutable head can never move
// again, so every later append would fail.
func TestTransitionImmutableHeadIsRefused(t *testing.T) {
	core(t)
	apiOnly(t)
	ns := auditNamespace(t, "immutable")
	refusedHead(t, ns, "making the head immutable", refusedImmutable, "patch", "cm", audit.HeadName, "--type=merge", "-p", `{"immutable":true}`)
}

// TestTransitionHeadOwnerReferenceIsRefused: an owner on the head hands it
// to the garbage collector, which deletes it with (or without) its owner.
func TestTransitionHeadOwnerReferenceIsRefused(t *testing.T) {
	core(t)
	apiOnly(t)
	ns := auditNamespace(t, "owner")
	owner, err := kubeFor(t, env.Admin.Name).CoreV1().ConfigMaps(ns).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "tx-owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"tx-owner","uid":%q}]}}`, owner.UID)
	refusedHead(t, ns, "an owner reference on the head", refusedHeadMeta, "patch", "cm", audit.HeadName, "--type=merge", "-p", patch)
}

// TestTransitionHeadFinalizerIsRefused: a finalizer nobody removes keeps a
// deleted head around for ever.
func TestTransitionHeadFinalizerIsRefused(t *testing.T) {
	core(t)
	apiOnly(t)
	ns := auditNamespace(t, "finalizer")
	refusedHead(t, ns, "a finalizer on the head", refusedHeadMeta, "patch", "cm", audit.HeadName, "--type=merge", "-p", `{"metadata":{"finalizers":["kubectl-gitops.io/hold"]}}`)
}

// TestTransitionHeadExtraDataKeyIsRefused: the head holds seq and hash and
// nothing a reader could take for part of the log.
func TestTransitionHeadExtraDataKeyIsRefused(t *testing.T) {
	core(t)
	apiOnly(t)
	ns := auditNamespace(t, "data")
	refusedHead(t, ns, "an extra data key in the head", refusedHeadData, "patch", "cm", audit.HeadName, "--type=merge", "-p", `{"data":{"approvedBy":"alice"}}`)
}

// TestTransitionHeadCreatedImmutableIsRefused: where the head is gone, the
// on-call group may create it only as the tool does, never immutable.
func TestTransitionHeadCreatedImmutableIsRefused(t *testing.T) {
	core(t)
	apiOnly(t)
	ns := auditNamespace(t, "create")
	ctx := context.Background()
	kube := kubeFor(t, env.Admin.Name)
	was, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, audit.HeadName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, audit.HeadName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	headObject := func(immutable bool) map[string]any {
		return map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata":  map[string]any{"name": audit.HeadName, "namespace": ns, "labels": map[string]any{audit.LabelKind: "head"}},
			"data":      map[string]any{"seq": was.Data["seq"], "hash": was.Data["hash"]},
			"immutable": immutable,
		}
	}
	oncall := newUser(t, env.Oncall.Name)
	errOut, code := applyAs(t, oncall, headObject(true))
	if code == 0 || !strings.Contains(errOut, refusedImmutable) {
		t.Errorf("creating an immutable head: exit %d, %q; want refused with %q", code, errOut, refusedImmutable)
	}
	if got := headState(t, ns); got != nil {
		t.Errorf("the refused head exists: %v", got)
	}
	// The head as the tool writes it is still accepted, and the log goes on.
	if errOut, code := applyAs(t, oncall, headObject(false)); code != 0 {
		t.Fatalf("creating the head as the tool does: exit %d: %s", code, errOut)
	}
	if out, errOut, code := oncall.run("kubectl", "gitops", "audit", "verify", "--audit-namespace", ns); code != 0 {
		t.Errorf("audit verify: exit %d: %s %s", code, out, errOut)
	}
}

// TestTransitionUnreadableHeadIsOverwrittenByTheWriter: a head left
// unreadable (by someone outside the guarded groups) is not a position the
// policy can compare with, and the tool's writer overwrites it: that move
// passes, and the head is readable again.
func TestTransitionUnreadableHeadIsOverwrittenByTheWriter(t *testing.T) {
	core(t)
	apiOnly(t)
	ns := auditNamespace(t, "unreadable")
	ctx := context.Background()
	kube := kubeFor(t, env.Admin.Name)
	if err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, audit.HeadName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	unreadable := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: audit.HeadName, Labels: map[string]string{audit.LabelKind: "head"}}, Data: map[string]string{"seq": "two", "hash": "?"}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, unreadable, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	store := audit.NewConfigMapStore(kubeFor(t, env.Oncall.Name), ns)
	r := &audit.Record{Event: audit.EventPatched, Actor: audit.Actor{Username: env.Oncall.Name}, Reason: "after the unreadable head",
		Outcome: audit.Outcome{Status: audit.StatusSucceeded}}
	if err := store.Append(ctx, r); err != nil {
		t.Fatalf("appending over an unreadable head: %v", err)
	}
	if h := headState(t, ns); h == nil || h["data"].(map[string]string)["seq"] != fmt.Sprint(r.Seq) {
		t.Errorf("the head after the append is %v, want seq %d", h, r.Seq)
	}
}

// TestTransitionAutomatedSyncInAPauseIsRefused: the sync a reconcile that
// began before the pause would start (Argo CD's SetAppOperation: the
// Application read again, an operation initiated by automation added) is
// refused on an Application a session holds paused, whoever writes it, in
// both pause forms (automated.enabled: false; automated removed, before
// 3.1). A person's Sync is not refused by this policy, nor an automated
// sync outside a session (an ApplicationSet's progressive sync of an
// Application on manual sync) or while automated sync is on (--hold fields).
// A parent paused for a session (its paused-by mark) is held alike.
// Each write is a server-side dry run: admission runs, nothing is stored.
func TestTransitionAutomatedSyncInAPauseIsRefused(t *testing.T) {
	apiOnly(t)
	e := environment(t)
	ctx := context.Background()
	apps := appsClient(t)
	admin := newUser(t, env.Admin.Name)
	session := `{"id":"tx-autosync-1","state":"paused","openedBy":"` + env.Oncall.Name + `"}`
	paused := runtimeCopy(fullPolicy)
	paused["automated"].(map[string]any)["enabled"] = false
	removed := runtimeCopy(fullPolicy)
	delete(removed, "automated")
	sync := func(initiatedBy map[string]any) string {
		op, _ := json.Marshal(map[string]any{"operation": map[string]any{"sync": map[string]any{"revision": "HEAD"}, "initiatedBy": initiatedBy}})
		return string(op)
	}
	automated, person := sync(map[string]any{"automated": true}), sync(map[string]any{"username": "colleague"})
	parent := map[string]string{breakglass.PausedByAnnotation: "tx-autosync-child"}
	child := map[string]string{breakglass.SessionAnnotation: session}
	for i, tt := range []struct {
		name, op string
		policy   map[string]any
		held     map[string]string
		refused  bool
	}{
		{"automated sync, paused by automated.enabled false", automated, paused, child, true},
		{"automated sync, paused by removing automated", automated, removed, child, true},
		{"automated sync on a parent paused for a session", automated, paused, parent, true},
		{"a person's sync in the pause", person, paused, child, false},
		{"automated sync, no session", automated, paused, nil, false},
		{"automated sync, automated on in the session", automated, runtimeCopy(fullPolicy), child, false},
	} {
		name := fmt.Sprintf("tx-autosync-%d", i)
		app := e.Application(name, "apps/"+name, name, tt.policy)
		app.SetAnnotations(tt.held)
		if _, err := apps.Create(ctx, app, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		_, errOut, code := admin.run("kubectl", "-n", e.ArgoNamespace, "patch", "application", name, "--type=merge", "--dry-run=server", "-p", tt.op)
		_ = apps.Delete(ctx, name, metav1.DeleteOptions{})
		switch refused := code != 0; {
		case tt.refused && (!refused || !strings.Contains(errOut, "kubectl-gitops-no-automated-sync-in-a-pause") || !strings.Contains(errOut, "would revert the live fix")):
			t.Errorf("%s: exit %d, %q; want refused by the pause's policy", tt.name, code, errOut)
		case !tt.refused && refused:
			t.Errorf("%s: refused (%q); want allowed", tt.name, errOut)
		}
	}
}
