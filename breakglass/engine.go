package breakglass

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/ticket"
)

// FieldManager names kubectl gitops in the managedFields of what it patches.
const FieldManager = "kubectl-gitops"

// ApplicationGVR is Argo CD's Application resource.
var ApplicationGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}

// Engine carries out break-glass sessions. Its clients talk to the Argo CD
// cluster, where Applications and the audit log live; targets of other
// destination clusters are reached through Clusters.
type Engine struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	Mapper  meta.RESTMapper
	Audit   audit.Store
	// AppNamespace is where Applications live.
	AppNamespace string
	// ControllerWait bounds waiting for Argo CD's controller; 0 means 30s.
	ControllerWait time.Duration
	// Tickets files reconcile tickets in Jira; nil queues them, and
	// TicketsOff says why (not configured, or configured wrongly).
	Tickets    Tickets
	TicketsOff error
	// ArgoUI is the Argo CD web UI's base URL that tickets link to; "" for
	// no link.
	ArgoUI string
	// Clusters reaches destination clusters other than the Argo CD
	// cluster; nil refuses them.
	Clusters Clusters
	// AfterPause runs right after the pause is recorded, AfterParentPause
	// right after each parent's. Tests use them to stop as a crash would, or
	// to make the patch fail; nil otherwise.
	AfterPause       func(ctx context.Context) error
	AfterParentPause func(ctx context.Context) error
}

// Request is what the user asked for.
type Request struct {
	App    string
	Target string // KIND/NAME as kubectl spells it
	// Namespace of the target; "" means the Application's destination.
	Namespace string
	Patch     PatchSpec
	Reason    string
	Incident  string
	// NoTerminate refuses, rather than terminates, a running sync operation.
	NoTerminate bool
	// Join patches within the Application's open session instead of
	// opening one.
	Join bool
	// Ticket attaches the session to this existing Jira issue instead of
	// filing a new one.
	Ticket string
	// TargetContext is the kubeconfig context of the destination cluster;
	// "" finds it by the destination's server.
	TargetContext string
}

// Plan is a checked break-glass, ready to execute: nothing has changed yet.
type Plan struct {
	Request   Request
	Actor     audit.Actor
	App       audit.AppRef
	Cluster   string
	Target    audit.Target
	PatchType string
	// PatchBody is the patch as sent to the API server; never show or
	// store it: PatchRedacted is its redacted form, PatchSHA256 the digest
	// of the patch as the user gave it.
	PatchBody     []byte
	PatchRedacted string
	PatchSHA256   string
	// Changes are the changed fields, redacted like the audit log.
	Changes []audit.Change
	// SyncPolicy is the Application's spec.syncPolicy now and after the pause.
	SyncPolicyBefore, SyncPolicyAfter any
	// Git is where Git stands: the session compares later revisions with it.
	Git audit.Git
	// TargetOutOfSync is whether Argo CD already flagged the target.
	TargetOutOfSync bool
	// Parents are app-of-apps parents that would undo the pause, so they
	// are paused too.
	Parents []string

	// Join is the open session this patch joins; nil opens a new one.
	Join *Session
	// Source is where the Application's manifests live, for the ticket.
	Source ticket.Source
	// Ticket is the existing Jira issue of --ticket, checked with Jira.
	Ticket *audit.Ticket
	// Warnings are what the checks found worth saying but not refusing.
	Warnings []string
	// Live and Patched are the target now and after the patch (from the
	// server-side dry run), redacted and without bookkeeping, for a diff.
	Live, Patched map[string]any
	// TargetContext is the kubeconfig context that reaches the target; ""
	// when it lives in the Argo CD cluster.
	TargetContext string

	cluster *Cluster
	// fields are the changed paths with digests of their values, for the
	// session; redactor knows the secret values of this patch.
	fields    []PatchedField
	redaction *patchRedaction
	// pendingPatch is the id of this plan's patch in the session while it
	// is being sent.
	pendingPatch string
	// diff is what the dry run said the patch changes, unredacted, and
	// live the target it was computed from: the real patch must meet the
	// same object (resourceVersion) or change the same things.
	diff []audit.Change
	live *unstructured.Unstructured
	// disableAutomated pauses with automated.enabled: false (Argo CD ≥ 3.1).
	disableAutomated bool
	// PauseMechanism says how the pause works on this Argo CD; "" when the
	// plan joins a paused session.
	PauseMechanism string

	parents []*unstructured.Unstructured

	gvr schema.GroupVersionResource
}

// Result is what Execute did.
type Result struct {
	Session  *Session
	Warnings []string
}

// Errors the plugin maps to messages and exit codes.
var (
	ErrNotFound     = errors.New("not found")
	ErrNotManaged   = errors.New("not managed by the application")
	ErrForbidden    = errors.New("not allowed")
	ErrSessionOpen  = errors.New("a break-glass session is already open")
	ErrConflict     = errors.New("changed by someone else")
	ErrNothingToDo  = errors.New("the patch changes nothing")
	ErrPatchInvalid = errors.New("invalid patch")
	ErrNotSupported = errors.New("not supported")
	ErrSyncRunning  = errors.New("a sync operation is running")
)

func (e *Engine) controllerWait() time.Duration {
	if e.ControllerWait == 0 {
		return 30 * time.Second
	}
	return e.ControllerWait
}

// Whoami asks the API server who the caller is.
func (e *Engine) Whoami(ctx context.Context) (audit.Actor, error) {
	review, err := e.Kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return audit.Actor{}, fmt.Errorf("asking the API server who you are: %w", err)
	}
	u := review.Status.UserInfo
	return audit.Actor{Username: u.Username, UID: u.UID, Groups: u.Groups}, nil
}

// Plan runs every preflight check and computes the change with a server-side
// dry run. It writes nothing.
func (e *Engine) Plan(ctx context.Context, req Request) (*Plan, error) {
	if strings.TrimSpace(req.Reason) == "" {
		return nil, fmt.Errorf("%w: --reason is required", ErrPatchInvalid)
	}
	patchType, body, err := req.Patch.Build()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPatchInvalid, err)
	}
	actor, err := e.Whoami(ctx)
	if err != nil {
		return nil, err
	}
	app, err := e.Dynamic.Resource(ApplicationGVR).Namespace(e.AppNamespace).Get(ctx, req.App, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: application %q in namespace %s (set --app-namespace if Applications live elsewhere)", ErrNotFound, req.App, e.AppNamespace)
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("%w: %s may not read application %s/%s: %v", ErrForbidden, actor.Username, e.AppNamespace, req.App, err)
	case err != nil:
		return nil, err
	}
	join, err := joinable(app, req)
	if err != nil {
		return nil, err
	}
	if join != nil {
		// A joined patch inherits the session's saved policy and ticket:
		// only if its audit records agree with the annotation.
		logged, err := e.sessionFromLog(ctx, req.App, join.ID)
		if err != nil {
			return nil, err
		}
		if bad := logged.mismatches(join); len(bad) > 0 {
			return nil, fmt.Errorf("%w on %s: %s; nothing was changed: finish the session with `kubectl gitops restore %s --force --reason …`, which restores what the audit log says", ErrSessionMismatch, req.App, strings.Join(bad, "; "), req.App)
		}
	}
	if join == nil {
		if err := e.checkApplicationSetOwner(ctx, app); err != nil {
			return nil, err
		}
	}
	if started, running := syncRunning(app); running && req.NoTerminate {
		return nil, fmt.Errorf("%w on %s (started %s) and --no-terminate is set: wait for it, or drop --no-terminate to terminate it before patching", ErrSyncRunning, req.App, started)
	}

	kindArg, name, ok := strings.Cut(req.Target, "/")
	if !ok || kindArg == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("%w: target %q: use KIND/NAME, e.g. deployment/web", ErrPatchInvalid, req.Target)
	}
	dest, _, _ := unstructured.NestedStringMap(app.Object, "spec", "destination")
	cluster, err := e.targetCluster(req.App, dest, req.TargetContext)
	if err != nil {
		return nil, err
	}
	gr := schema.ParseGroupResource(kindArg)
	gvr, err := cluster.Mapper.ResourceFor(schema.GroupVersionResource{Group: gr.Group, Resource: gr.Resource})
	if err != nil {
		return nil, fmt.Errorf("%w: the server has no resource type %q (as in kubectl get %s)", ErrNotFound, kindArg, kindArg)
	}
	gvk, err := cluster.Mapper.KindFor(gvr)
	if err != nil {
		return nil, err
	}
	namespace := req.Namespace
	if namespace == "" {
		namespace = dest["namespace"]
	}
	target := audit.Target{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: namespace, Name: name}
	status, managed := managedStatus(app, target)
	if !managed {
		return nil, fmt.Errorf("%w: %s in namespace %s is not one of application %s's managed resources (see kubectl get application %s -n %s -o jsonpath='{.status.resources}')",
			ErrNotManaged, target, namespace, req.App, req.App, e.AppNamespace)
	}
	if err := allowed(ctx, e.Kube, ApplicationGVR, e.AppNamespace, req.App); err != nil {
		return nil, err
	}
	// Argo CD ≥ 3.1 (its schema has automated.enabled) can turn automated
	// sync off and keep its settings, and tracks by annotation by default.
	_, enabledInSchema, _ := e.AutomatedSchema()
	var parents []*unstructured.Unstructured
	if join == nil {
		if parents, err = e.selfHealingParents(ctx, app, enabledInSchema); err != nil {
			return nil, err
		}
	}
	var parentNames []string
	for _, parent := range parents {
		if err := allowed(ctx, e.Kube, ApplicationGVR, namespaceOr(parent.GetNamespace(), e.AppNamespace), parent.GetName()); err != nil {
			return nil, fmt.Errorf("%w (parent application %s self-heals %s and must be paused too)", err, parent.GetName(), req.App)
		}
		parentNames = append(parentNames, parent.GetName())
	}
	if err := allowed(ctx, cluster.Kube, gvr, namespace, name); err != nil {
		return nil, err
	}

	client := cluster.Dynamic.Resource(gvr).Namespace(namespace)
	live, err := client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", target, err)
	}
	if len(req.Patch.Images) > 0 {
		if body, err = req.Patch.imagePatch(target, live.Object); err != nil {
			return nil, err
		}
	}
	dry, err := client.Patch(ctx, name, PatchTypes[patchType], body, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: FieldManager})
	if err != nil {
		red, redErr := redactPatch(target, patchType, body, live.Object)
		if redErr != nil {
			return nil, fmt.Errorf("%w: %v", ErrPatchInvalid, redErr)
		}
		return nil, fmt.Errorf("%w: the API server rejects the patch of %s (server-side dry run): %s", ErrPatchInvalid, target, red.redactor.Text(err.Error()))
	}
	// Judged against the object before and after the patch, so that a
	// value is redacted if it is secret in either.
	red, err := redactPatch(target, patchType, body, live.Object, dry.Object)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPatchInvalid, err)
	}
	diff := Diff(live.Object, dry.Object)
	if len(diff) == 0 {
		return nil, fmt.Errorf("%w on %s: it is already live", ErrNothingToDo, target)
	}
	changes := red.changes(target, diff, live.Object, dry.Object)
	ticketRef, warning, err := e.checkTicket(ctx, req, join)
	if err != nil {
		return nil, err
	}
	before, _, _ := unstructured.NestedFieldCopy(app.Object, "spec", "syncPolicy")
	after, git, disable := before, gitAt(app), false
	if join != nil {
		// Already paused: the policy stays as it is, and Git is compared
		// with the revision the session opened at.
		git = sessionGit(join)
	} else {
		// Removing automated is the fallback every version honours.
		disable = enabledInSchema
		after = pausedPolicy(before, disable)
	}
	project, _, _ := unstructured.NestedString(app.Object, "spec", "project")
	server := dest["server"]
	if server == "" {
		server = cluster.Server
	}
	plan := &Plan{
		Request: req, Actor: actor,
		App:     audit.AppRef{Namespace: e.AppNamespace, Name: req.App, Project: project},
		Cluster: server, Target: target,
		PatchType: patchType, PatchBody: body, PatchRedacted: red.body, PatchSHA256: digestRaw(req.Patch, body),
		Changes: changes, fields: patchedFields(target, diff, live.Object, dry.Object), redaction: red,
		diff: diff, live: live,
		SyncPolicyBefore: before, SyncPolicyAfter: after,
		Git: git, TargetOutOfSync: status == "OutOfSync",
		Parents: parentNames, parents: parents,
		Join: join, Source: source(app), Ticket: ticketRef,
		Live: cleanForDiff(target, live.Object), Patched: cleanForDiff(target, dry.Object),
		TargetContext: cluster.Context, cluster: cluster, disableAutomated: disable,
		gvr: gvr,
	}
	if warning != "" {
		plan.Warnings = append(plan.Warnings, warning)
	}
	if join == nil {
		plan.PauseMechanism = "remove spec.syncPolicy.automated (this Argo CD's Application schema has no automated.enabled)"
		if disable {
			plan.PauseMechanism = "set spec.syncPolicy.automated.enabled to false (Argo CD >= 3.1; prune and selfHeal stay visible)"
		}
	}
	if err := plan.checkSize(); err != nil {
		return nil, err
	}
	return plan, nil
}

// joinable returns the open session of app that req may join, nil when
// none is open, and an error naming the holder otherwise: a session can be
// joined only once it has patched, and only with --join.
func joinable(app *unstructured.Unstructured, req Request) (*Session, error) {
	value, ok := app.GetAnnotations()[SessionAnnotation]
	if !ok {
		if req.Join {
			return nil, fmt.Errorf("%w: no open break-glass session on %s to --join; drop --join to open one", ErrNotFound, req.App)
		}
		return nil, nil
	}
	session, err := ParseSession(value)
	if err != nil {
		return nil, fmt.Errorf("%w on %s: the %s annotation is unreadable", ErrSessionOpen, req.App, SessionAnnotation)
	}
	holder := fmt.Sprintf("session %s by %s since %s (state %s)", session.ID, session.OpenedBy, session.OpenedAt.Format(time.RFC3339), session.State)
	switch {
	case session.State != StatePatched:
		return nil, fmt.Errorf("%w on %s: %s: finish or undo it with `kubectl gitops restore %s`", ErrSessionOpen, req.App, holder, req.App)
	case !req.Join:
		return nil, fmt.Errorf("%w on %s: %s: add --join to patch within it, or finish it with `kubectl gitops restore %s`", ErrSessionOpen, req.App, holder, req.App)
	}
	return session, nil
}

// managedStatus finds target among the Application's managed resources and
// returns Argo CD's sync status for it.
func managedStatus(app *unstructured.Unstructured, t audit.Target) (string, bool) {
	resources, _, _ := unstructured.NestedSlice(app.Object, "status", "resources")
	for _, r := range resources {
		m, _ := r.(map[string]any)
		if m == nil {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		if str("group") == t.Group && str("kind") == t.Kind && str("name") == t.Name && str("namespace") == t.Namespace {
			return str("status"), true
		}
	}
	return "", false
}

// allowed checks with a SelfSubjectAccessReview, in the cluster of kube,
// that the caller may patch.
func allowed(ctx context.Context, kube kubernetes.Interface, gvr schema.GroupVersionResource, namespace, name string) error {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "patch", Group: gvr.Group, Resource: gvr.Resource, Namespace: namespace, Name: name},
	}}
	res, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("checking your permissions: %w", err)
	}
	if !res.Status.Allowed {
		return fmt.Errorf("%w: you may not patch %s %s/%s; ask for the break-glass role", ErrForbidden, gvr.GroupResource(), namespace, name)
	}
	return nil
}

func clientInfo() audit.Client {
	host, _ := os.Hostname()
	c := audit.Client{Host: host}
	if u, err := user.Current(); err == nil {
		c.User = u.Username
	}
	return c
}

// record appends an audit record for plan's session; nothing proceeds when
// it fails.
func (e *Engine) record(ctx context.Context, p *Plan, session string, event audit.Event, outcome audit.Outcome, edit func(*audit.Record)) (*audit.Record, error) {
	r := &audit.Record{
		Event: event, Session: session, Actor: p.Actor, Client: clientInfo(),
		Reason: p.Redact(p.Request.Reason), Incident: p.Redact(p.Request.Incident),
		Application: &p.App, Cluster: &audit.Cluster{Server: p.Cluster}, Target: &p.Target,
		Git: &p.Git, Outcome: outcome,
	}
	if edit != nil {
		edit(r)
	}
	r.Outcome.Error = p.Redact(r.Outcome.Error)
	if err := e.Audit.Append(ctx, r); err != nil {
		return nil, fmt.Errorf("writing the %s audit record (nothing further was done): %w", event, err)
	}
	return r, nil
}

// Execute pauses the Application keeping its policy, applies the patch, and
// records each step. A patch that fails after the pause undoes the pause and
// records breakglass.aborted.
func (e *Engine) Execute(ctx context.Context, p *Plan) (*Result, error) {
	withPatch := func(r *audit.Record) {
		r.Patch = &audit.Patch{Type: p.PatchType, Body: p.PatchRedacted, SHA256: p.PatchSHA256}
		r.Changes = p.Changes
		r.SyncPolicy = &audit.SyncPolicy{Before: p.SyncPolicyBefore, After: p.SyncPolicyAfter}
	}
	session := p.Join
	if session == nil {
		now := time.Now().UTC()
		session = &Session{
			ID: now.Format("20060102-150405") + "-" + rand.String(5), State: StatePausing,
			OpenedBy: p.Actor.Username, OpenedAt: now, Reason: p.Redact(p.Request.Reason), Incident: p.Redact(p.Request.Incident),
			GitRevision: p.Git.Revision, GitRevisions: p.Git.Revisions,
		}
		saved, err := json.Marshal(p.SyncPolicyBefore)
		if err != nil {
			return nil, err
		}
		session.SavedSyncPolicy = saved
	}
	if _, err := e.record(ctx, p, session.ID, audit.EventPlanned, audit.Outcome{Status: audit.StatusStarted}, withPatch); err != nil {
		return nil, err
	}
	res := &Result{Session: session}
	if p.Join == nil {
		warnings, err := e.pause(ctx, p, session)
		if err != nil {
			return nil, err
		}
		res.Warnings = warnings
	}
	// A sync still running would apply Git's state over the fix.
	if warning := e.terminateSync(ctx, p.App.Name, session); warning != "" {
		res.Warnings = append(res.Warnings, warning)
	}

	// The session learns of the patch before it is sent: a restore that
	// read the session before then refuses to remove it, and one that
	// removed it already makes this write fail, before anything is patched.
	pending := SessionPatch{ID: rand.String(6), Target: p.Target, Type: p.PatchType, Fields: p.fields, At: time.Now().UTC(), Pending: true}
	p.pendingPatch = pending.ID
	terminated := session.TerminatedSync
	marked, err := e.updateSession(ctx, p.App.Name, session.ID, func(s *Session) {
		s.Patches = append(s.Patches, pending)
		if terminated != "" {
			s.TerminatedSync = terminated
		}
	})
	if err != nil {
		return nil, e.abort(ctx, p, session, fmt.Errorf("recording the patch in session %s before sending it: %w", session.ID, err), withPatch)
	}
	session = marked
	if err := e.patchTarget(ctx, p); err != nil {
		return nil, e.abort(ctx, p, session, errors.New(p.Redact(err.Error())), withPatch)
	}
	if written, err := e.updateSession(ctx, p.App.Name, session.ID, func(s *Session) {
		s.State = StatePatched
		if sp := s.patchNamed(pending.ID); sp != nil {
			sp.Pending, sp.Fields = false, p.fields
		}
	}); err != nil {
		res.Warnings = append(res.Warnings, "the patch is live but the session annotation could not be updated: "+err.Error())
	} else {
		session = written
	}
	res.Session = session
	// Does Argo CD see the patch? If the target stays Synced, the patch only
	// added fields Git never set, and resource-level Synced will prove nothing.
	if err := e.waitRefreshed(ctx, p.App.Name); err != nil {
		res.Warnings = append(res.Warnings, "could not learn whether Argo CD sees the patch: "+err.Error())
	} else if app, err := e.Dynamic.Resource(ApplicationGVR).Namespace(e.AppNamespace).Get(ctx, p.App.Name, metav1.GetOptions{}); err == nil {
		status, _ := managedStatus(app, p.Target)
		saw := status == "OutOfSync"
		if !saw {
			res.Warnings = append(res.Warnings, fmt.Sprintf("Argo CD still reports %s Synced: the patch only adds fields Git never set, so restore will need the field-level check (ARGOCD_SERVER) or --force", p.Target))
		}
		if written, err := e.updateSession(ctx, p.App.Name, session.ID, func(s *Session) {
			if sp := s.patchNamed(pending.ID); sp != nil {
				sp.ArgoSawPatch = &saw
			}
		}); err != nil {
			res.Warnings = append(res.Warnings, "could not record Argo CD's view of the patch in the session: "+err.Error())
		} else {
			session = written
			res.Session = session
		}
	}
	patched, err := e.record(ctx, p, session.ID, audit.EventPatched, audit.Outcome{Status: audit.StatusSucceeded}, withPatch)
	if err != nil {
		return res, err
	}
	res.Session = session
	if warning := e.ticketPatch(ctx, p, session, patched); warning != "" {
		res.Warnings = append(res.Warnings, warning)
	}
	return res, nil
}

// pause pauses the self-healing parents, then the Application, recording
// each. With parents, the child's session (state pausing, parents listed) is
// written first, so that an interruption at any point leaves a session that
// status shows and restore finishes: never a parent paused for nobody. On
// failure everything it paused is undone and recorded aborted.
func (e *Engine) pause(ctx context.Context, p *Plan, session *Session) ([]string, error) {
	samePolicy := func(app *unstructured.Unstructured) error {
		if policy, _, _ := unstructured.NestedFieldNoCopy(app.Object, "spec", "syncPolicy"); !equalJSON(policy, p.SyncPolicyBefore) {
			return fmt.Errorf("%w: the sync policy of %s changed since the plan; run the command again", ErrConflict, p.App.Name)
		}
		return nil
	}
	unchanged := func(app *unstructured.Unstructured) error {
		if _, open := app.GetAnnotations()[SessionAnnotation]; open {
			return e.explainConflict(ctx, p.App.Name, fmt.Errorf("%w: a session was opened on %s meanwhile", ErrSessionOpen, p.App.Name))
		}
		return samePolicy(app)
	}
	var warnings []string
	if len(p.parents) > 0 {
		for _, parent := range p.parents {
			session.PausedParents = append(session.PausedParents, savedParent(parent))
		}
		if err := e.updateApp(ctx, p.App.Name, unchanged, func(*unstructured.Unstructured) map[string]any {
			return sessionPatch(session, nil)
		}); err != nil {
			return nil, e.abortPause(ctx, p, session, fmt.Errorf("opening the session on %s: %w", p.App.Name, err))
		}
		unchanged = func(app *unstructured.Unstructured) error {
			if err := ownSession(p.App.Name, session.ID)(app); err != nil {
				return err
			}
			return samePolicy(app)
		}
	}
	for _, parent := range p.parents {
		parentRef := audit.AppRef{Namespace: namespaceOr(parent.GetNamespace(), e.AppNamespace), Name: parent.GetName()}
		saved := savedParent(parent)
		var before any
		_ = json.Unmarshal(saved.SavedSyncPolicy, &before)
		withParent := func(r *audit.Record) {
			r.Application = &parentRef
			r.Target = nil
			r.SyncPolicy = &audit.SyncPolicy{Before: before, After: pausedPolicy(before, p.disableAutomated)}
		}
		if _, err := e.record(ctx, p, session.ID, audit.EventPaused, audit.Outcome{Status: audit.StatusStarted}, withParent); err != nil {
			return nil, e.abortPause(ctx, p, session, err)
		}
		if err := e.pauseParent(ctx, parent, p.App.Name, session, p.disableAutomated); err != nil {
			return nil, e.abortPause(ctx, p, session, fmt.Errorf("pausing parent application %s: %w", parent.GetName(), err))
		}
		if _, err := e.record(ctx, p, session.ID, audit.EventPaused, audit.Outcome{Status: audit.StatusSucceeded}, withParent); err != nil {
			return nil, err
		}
		if e.AfterParentPause != nil {
			if err := e.AfterParentPause(ctx); err != nil {
				return nil, err
			}
		}
		if err := e.waitRefreshedIn(ctx, namespaceOr(parent.GetNamespace(), e.AppNamespace), parent.GetName()); err != nil {
			warnings = append(warnings, fmt.Sprintf("Argo CD's controller did not confirm the pause of parent %s within %s", parent.GetName(), e.controllerWait()))
		}
	}
	session.State = StatePaused
	if err := e.updateApp(ctx, p.App.Name, unchanged, func(app *unstructured.Unstructured) map[string]any {
		return sessionPatch(session, policyPatch(app, p.SyncPolicyAfter))
	}); err != nil {
		return nil, e.abortPause(ctx, p, session, fmt.Errorf("pausing %s: %w", p.App.Name, err))
	}
	if _, err := e.record(ctx, p, session.ID, audit.EventPaused, audit.Outcome{Status: audit.StatusSucceeded}, func(r *audit.Record) {
		r.SyncPolicy = &audit.SyncPolicy{Before: p.SyncPolicyBefore, After: p.SyncPolicyAfter}
	}); err != nil {
		return nil, err
	}
	if e.AfterPause != nil {
		if err := e.AfterPause(ctx); err != nil {
			return nil, err
		}
	}
	if err := e.waitRefreshed(ctx, p.App.Name); err != nil {
		warnings = append(warnings, fmt.Sprintf("Argo CD's controller did not confirm the pause within %s (%v): is it running? The patch was applied anyway.", e.controllerWait(), err))
	}
	return warnings, nil
}

// abortPause undoes a pause that failed half-way: the parents paused for
// this session get their policy back and the child's session (if it was
// written) is removed, under a context Ctrl-C does not cancel; then
// breakglass.aborted says why.
func (e *Engine) abortPause(ctx context.Context, p *Plan, session *Session, cause error) error {
	undo, cancel := undoContext(ctx)
	defer cancel()
	outcome := audit.Outcome{Status: audit.StatusFailed, Error: cause.Error()}
	err := cause
	if undoErr := e.restoreParents(undo, p.App.Name, session); undoErr != nil {
		outcome.Error += "; undoing the parents' pause failed: " + undoErr.Error()
		err = fmt.Errorf("%w; the parents' pause could not be undone (%v): run `kubectl gitops restore %s`", cause, undoErr, p.App.Name)
	} else if len(session.PausedParents) > 0 {
		_ = e.dropSession(undo, p.App.Name, session.ID)
	}
	if _, recErr := e.record(undo, p, session.ID, audit.EventAborted, outcome, nil); recErr != nil {
		return fmt.Errorf("%v, and %w", err, recErr)
	}
	return err
}

// undoContext is for steps that put things back: they must finish even when
// the user pressed Ctrl-C, within a bound of their own.
func undoContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

// dropSession removes the session annotation if it is still session id's,
// leaving the sync policy alone.
func (e *Engine) dropSession(ctx context.Context, name, id string) error {
	return e.updateApp(ctx, name, ownSession(name, id), func(*unstructured.Unstructured) map[string]any {
		return map[string]any{"metadata": map[string]any{"annotations": map[string]any{SessionAnnotation: nil}}}
	})
}

// abort handles a patch the API server rejected: a pause this command made
// is undone, a joined session stays as it was, and breakglass.aborted says
// why.
func (e *Engine) abort(ctx context.Context, p *Plan, session *Session, patchErr error, withPatch func(*audit.Record)) error {
	undo, cancel := undoContext(ctx)
	defer cancel()
	ctx = undo
	var undoErr error
	if p.Join == nil {
		undoErr = e.undoPause(ctx, p.App.Name, session, ownSession(p.App.Name, session.ID))
	} else if p.pendingPatch != "" {
		_, undoErr = e.updateSession(ctx, p.App.Name, session.ID, func(s *Session) { s.dropPatch(p.pendingPatch) })
	}
	outcome := audit.Outcome{Status: audit.StatusFailed, Error: "patch rejected: " + patchErr.Error()}
	if undoErr != nil {
		outcome.Error += "; undoing the pause failed too: " + undoErr.Error()
	}
	if _, recErr := e.record(ctx, p, session.ID, audit.EventAborted, outcome, withPatch); recErr != nil {
		return fmt.Errorf("patching %s failed (%v) and %w", p.Target, patchErr, recErr)
	}
	switch {
	case undoErr != nil:
		return fmt.Errorf("patching %s failed: %v; the pause could not be undone (%v): run `kubectl gitops restore %s`", p.Target, patchErr, undoErr, p.App.Name)
	case p.Join != nil:
		return fmt.Errorf("patching %s failed; session %s is as it was: %w", p.Target, session.ID, patchErr)
	}
	return fmt.Errorf("patching %s failed, so the pause was undone and sync is as before: %w", p.Target, patchErr)
}

// syncRunning reports whether app has a sync operation in progress, and
// since when.
func syncRunning(app *unstructured.Unstructured) (string, bool) {
	_, hasOp, _ := unstructured.NestedFieldNoCopy(app.Object, "operation")
	phase, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "phase")
	started, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "startedAt")
	return started, hasOp && (phase == "Running" || phase == "Terminating")
}

// terminateSync ends a running sync operation the way `argocd app
// terminate-op` does, and waits for the controller to stop it. It returns a
// warning when it could not.
func (e *Engine) terminateSync(ctx context.Context, name string, session *Session) string {
	apps := e.Dynamic.Resource(ApplicationGVR).Namespace(e.AppNamespace)
	app, err := apps.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "could not check for a running sync operation: " + err.Error()
	}
	started, running := syncRunning(app)
	if !running {
		return ""
	}
	err = e.updateApp(ctx, name, ownSession(name, session.ID), func(*unstructured.Unstructured) map[string]any {
		return map[string]any{"status": map[string]any{"operationState": map[string]any{"phase": "Terminating"}}}
	})
	if err != nil {
		return fmt.Sprintf("a sync operation (started %s) is running and could not be terminated (%v): it may apply Git's state over the patch", started, err)
	}
	session.TerminatedSync = started
	ctx, cancel := context.WithTimeout(ctx, e.controllerWait())
	defer cancel()
	for {
		app, err := apps.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if _, running := syncRunning(app); !running {
				return ""
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Sprintf("the sync operation started %s was asked to terminate but is still running after %s", started, e.controllerWait())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// explainConflict names the session that won a race for the Application,
// when there is one.
func (e *Engine) explainConflict(ctx context.Context, name string, conflict error) error {
	app, err := e.Dynamic.Resource(ApplicationGVR).Namespace(e.AppNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return conflict
	}
	if s, err := ParseSession(app.GetAnnotations()[SessionAnnotation]); err == nil {
		return fmt.Errorf("%w on %s: session %s by %s started first; nothing was changed by this command", ErrSessionOpen, name, s.ID, s.OpenedBy)
	}
	return conflict
}

// updateSession changes the session annotation (and requests a refresh),
// as long as the annotation still holds this session: change is applied to
// the session as it is now, not as this command last saw it, so that
// concurrent --join patches never drop each other's patch. It returns the
// session as written.
func (e *Engine) updateSession(ctx context.Context, name, id string, change func(*Session)) (*Session, error) {
	var written *Session
	err := e.updateApp(ctx, name, ownSession(name, id), func(app *unstructured.Unstructured) map[string]any {
		current, _ := ParseSession(app.GetAnnotations()[SessionAnnotation])
		change(current)
		written = current
		return sessionPatch(current, nil)
	})
	return written, err
}

// dropPatch removes the session's patch id.
func (s *Session) dropPatch(id string) {
	kept := s.Patches[:0]
	for _, sp := range s.Patches {
		if sp.ID != id {
			kept = append(kept, sp)
		}
	}
	s.Patches = kept
}

// patchNamed returns the session's patch id, nil when it has none.
func (s *Session) patchNamed(id string) *SessionPatch {
	for i := range s.Patches {
		if s.Patches[i].ID == id {
			return &s.Patches[i]
		}
	}
	return nil
}

// ownSession accepts an Application whose session annotation is session id.
func ownSession(name, id string) func(*unstructured.Unstructured) error {
	return func(app *unstructured.Unstructured) error {
		s, err := ParseSession(app.GetAnnotations()[SessionAnnotation])
		if err != nil || s.ID != id {
			return fmt.Errorf("%w: the break-glass session %s on %s was closed or replaced by someone else", ErrConflict, id, name)
		}
		return nil
	}
}

// sessionPatch sets the session annotation, requests a refresh and, when
// policy is not nil, patches spec.syncPolicy.
func sessionPatch(session *Session, policy any) map[string]any {
	value, _ := json.Marshal(session)
	patch := map[string]any{"metadata": map[string]any{
		"annotations": map[string]any{SessionAnnotation: string(value), RefreshAnnotation: "normal"},
	}}
	if policy != nil {
		patch["spec"] = map[string]any{"syncPolicy": policy}
	}
	return patch
}

// policyPatch is the merge patch that turns app's spec.syncPolicy into
// desired exactly: members desired lacks are deleted.
func policyPatch(app *unstructured.Unstructured, desired any) any {
	current, _, _ := unstructured.NestedFieldCopy(app.Object, "spec", "syncPolicy")
	return mergePatchFor(current, desired)
}

func mergePatchFor(current, desired any) any {
	cm, cok := current.(map[string]any)
	dm, dok := desired.(map[string]any)
	if !cok || !dok {
		return desired
	}
	patch := map[string]any{}
	for k := range cm {
		if _, keep := dm[k]; !keep {
			patch[k] = nil
		}
	}
	for k, v := range dm {
		if !equalJSON(cm[k], v) {
			patch[k] = mergePatchFor(cm[k], v)
		}
	}
	return patch
}

// updateApp writes a merge patch built from the current Application, with
// its resourceVersion as precondition. Argo CD's controller rewrites status
// all the time, so on a conflict the Application is read again and, if check
// still accepts it (nobody changed what this write guards), the patch is
// rebuilt and sent again.
func (e *Engine) updateApp(ctx context.Context, name string, check func(*unstructured.Unstructured) error, build func(*unstructured.Unstructured) map[string]any) error {
	return e.updateAppIn(ctx, e.AppNamespace, name, check, build)
}

func (e *Engine) updateAppIn(ctx context.Context, namespace, name string, check func(*unstructured.Unstructured) error, build func(*unstructured.Unstructured) map[string]any) error {
	apps := e.Dynamic.Resource(ApplicationGVR).Namespace(namespace)
	for attempt := 0; attempt < 10; attempt++ {
		app, err := apps.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := check(app); err != nil {
			return err
		}
		patch := build(app)
		meta, _ := patch["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			patch["metadata"] = meta
		}
		meta["resourceVersion"] = app.GetResourceVersion()
		body, err := json.Marshal(patch)
		if err != nil {
			return err
		}
		_, err = apps.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("%w: application %s kept changing while this command ran; run it again", ErrConflict, name)
}

// undoPause writes the saved policies back, the parents' first, and removes
// the session last (as long as check accepts it), so that an interruption
// leaves a session that says what is still paused.
func (e *Engine) undoPause(ctx context.Context, name string, s *Session, check func(*unstructured.Unstructured) error) error {
	if err := e.restoreParents(ctx, name, s); err != nil {
		return err
	}
	return e.restorePolicy(ctx, name, s, check)
}

// unchangedSession accepts an Application whose session is s as restore
// evaluated it: the same patches, none of them still being sent. A patch
// that landed meanwhile must not be reverted by a restore that never saw it.
func unchangedSession(name string, s *Session) func(*unstructured.Unstructured) error {
	return func(app *unstructured.Unstructured) error {
		if err := ownSession(name, s.ID)(app); err != nil {
			return err
		}
		current, _ := ParseSession(app.GetAnnotations()[SessionAnnotation])
		if pending := current.pending(); pending != nil {
			return fmt.Errorf("%w: a patch of %s is being applied in session %s (since %s): run restore again once it is done", ErrConflict, pending.Target, s.ID, pending.At.Format(time.RFC3339))
		}
		if len(current.Patches) != len(s.Patches) {
			return fmt.Errorf("%w: session %s on %s gained a patch while restore ran: run restore again, it must check that patch too", ErrConflict, s.ID, name)
		}
		return nil
	}
}

// pending is a patch of the session still being sent, nil when none is.
func (s *Session) pending() *SessionPatch {
	for i := range s.Patches {
		if s.Patches[i].Pending {
			return &s.Patches[i]
		}
	}
	return nil
}

// restorePolicy makes spec.syncPolicy the session's saved policy exactly,
// drops the session annotation and requests a refresh, in one patch, as
// long as check accepts the Application as it is then.
func (e *Engine) restorePolicy(ctx context.Context, name string, s *Session, check func(*unstructured.Unstructured) error) error {
	var saved any
	if err := json.Unmarshal(s.SavedSyncPolicy, &saved); err != nil {
		return fmt.Errorf("the session's saved sync policy is unreadable: %w", err)
	}
	return e.updateApp(ctx, name, check, func(app *unstructured.Unstructured) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{SessionAnnotation: nil, RefreshAnnotation: "normal"}},
			"spec":     map[string]any{"syncPolicy": policyPatch(app, saved)},
		}
	})
}

// waitRefreshed waits until the controller has removed the refresh
// annotation, i.e. has reconciled the Application as last written.
func (e *Engine) waitRefreshed(ctx context.Context, name string) error {
	return e.waitRefreshedIn(ctx, e.AppNamespace, name)
}

func (e *Engine) waitRefreshedIn(ctx context.Context, namespace, name string) error {
	ctx, cancel := context.WithTimeout(ctx, e.controllerWait())
	defer cancel()
	for {
		app, err := e.Dynamic.Resource(ApplicationGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, pending := app.GetAnnotations()[RefreshAnnotation]; !pending {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
