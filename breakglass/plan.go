package breakglass

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/drift"
	"github.com/kubectl-gitops/kubectl-gitops/next"
)

// Plan is a checked break-glass, ready to execute: nothing has changed yet.
type Plan struct {
	Request   Request
	Actor     audit.Actor
	App       audit.AppRef
	Cluster   string
	Target    audit.Target
	PatchType string
	// PatchBody is the patch as sent to the API server; never show or
	// store it: PatchRedacted is its redacted form, PatchHMAC the keyed
	// digest (under the digest key PatchKeyID) of the patch as the user
	// gave it; both "" when the install has no digest key.
	PatchBody     []byte
	PatchRedacted string
	PatchHMAC     string
	PatchKeyID    string
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
	Source argocd.Source
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
	// PauseFor is how long the new session's pause lasts (0: no expiry),
	// AutoRestore whether it restores by itself once Git has caught up:
	// what the user asked within the namespace's contract.
	PauseFor    time.Duration
	AutoRestore bool

	cluster *argocd.Cluster
	// fields are the changed paths with digests of their values, for the
	// session; redactor knows the secret values of this patch.
	fields    []PatchedField
	redaction *patchRedaction
	// diff is what the dry run said the patch changes, unredacted, and
	// live the target it was computed from: the real patch must meet the
	// same object (resourceVersion) or change the same things.
	diff []audit.Change
	live *unstructured.Unstructured
	// app is the Application as the plan read it: the pause is built from
	// it, its resourceVersion the precondition, saving a read.
	app argocd.App
	// disableAutomated pauses with automated.enabled: false (Argo CD ≥ 3.1).
	disableAutomated bool
	// guarded is whether the API server refuses the automated sync a
	// reconcile begun before the pause would start (PauseGuardPolicy):
	// then the patch need not wait for Argo CD's controller.
	guarded bool
	// PauseMechanism is how the pause works on this Argo CD; PauseJoined
	// when the plan joins a paused session.
	PauseMechanism PauseMechanism
	// Hold is how the session holds the fix (HoldApp, HoldSync): the
	// request's for a new session, the session's for a join.
	Hold string

	parents []argocd.App

	gvr schema.GroupVersionResource
}

// joinWithin refuses a --join whose target namespace's contract pauses
// sync for less than the session does: the session keeps its expiry, so a
// patch there would be held longer than that namespace allows.
func joinWithin(contract drift.Contract, join *Session, now time.Time) error {
	max, _, err := contract.Pause(0, nil)
	switch {
	case err != nil:
		return err
	case max == 0:
		return nil
	case join.Expires == nil:
		return fmt.Errorf("%w: namespace %s pauses sync for at most %s (%s), and session %s never expires: patch it in a session of its own", drift.ErrContract, contract.Namespace, max, drift.ContractMaxPause, join.ID)
	case join.Expires.After(now.Add(max)):
		return fmt.Errorf("%w: namespace %s pauses sync for at most %s (%s), and session %s pauses until %s: patch it in a session of its own", drift.ErrContract, contract.Namespace, max, drift.ContractMaxPause, join.ID, join.Expires.UTC().Format(time.RFC3339))
	}
	return nil
}

// Validate is every rule a request must meet before anything is read: a
// reason, a target spelled KIND/NAME, a change that builds, a ticket key
// shaped like Jira's. Plan checks it; the plugin calls it first to refuse
// bad input as a usage error.
func (r Request) Validate() error {
	if kind, name, ok := strings.Cut(r.Target, "/"); !ok || kind == "" || name == "" {
		return inputError(InputTarget, r.Target, "use KIND/NAME, e.g. deployment/web")
	}
	if _, _, err := r.Patch.Build(); err != nil {
		return err
	}
	if strings.TrimSpace(r.Reason) == "" {
		return inputError(InputReason, "", `required: say why the live state must change, e.g. "5xx spike after 1.2.3"`)
	}
	if !r.AllowSecretText {
		if err := checkText(r.texts()...); err != nil {
			return err
		}
	}
	if r.Ticket != "" && !TicketKey.MatchString(r.Ticket) {
		return inputError(InputTicket, r.Ticket, "not a Jira issue key such as OPS-42")
	}
	if r.Expires < 0 {
		return inputError(InputExpires, r.Expires.String(), "must be positive (leave it out for the namespace's max-pause)")
	}
	if r.Join && r.Expires != 0 {
		return inputError(InputExpires, "", "a joined patch keeps the session's expiry: give none")
	}
	if r.Join && r.AutoRestore != nil {
		return inputError(InputAutoRestore, "", "a joined patch keeps the session's choice: give none")
	}
	switch {
	case r.Join && r.Hold != "":
		return inputError(InputHold, r.Hold, "a joined patch is held as its session holds: give none")
	case r.Hold != "" && !slices.Contains(Holds, r.Hold):
		return inputError(InputHold, r.Hold, "use app (pause sync and hold the patched fields), sync (pause sync only) or fields (hold the patched fields, sync stays on)")
	}
	return nil
}

// Plan runs every preflight check and computes the change with a server-side
// dry run. It writes nothing. Its steps run in lifecycle order, each filling
// in the plan; the first that refuses ends it.
func (e *Engine) Plan(ctx context.Context, req Request) (*Plan, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	p, err := e.startPlanning(ctx, req)
	if err != nil {
		return nil, err
	}
	for _, step := range []func(context.Context) error{
		p.readApplication,
		p.resolveSession,
		p.resolveTarget,
		p.checkAccess,
		p.planHold,
		p.dryRun,
		p.checkTicket,
		p.planPause,
		p.digest,
	} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	if err := p.plan.checkSize(); err != nil {
		return nil, err
	}
	return p.plan, nil
}

// CheckAccess is the part of Plan that decides whether the caller may
// break glass on req's target at all, before the change is known: the
// Application and its session, the target, the caller's rights on both and
// the target namespace's contract. The form asks its questions only of
// someone who may act on the answers (it used to ask them all, then refuse).
func (e *Engine) CheckAccess(ctx context.Context, req Request) error {
	req.Patch = PatchSpec{Type: "merge", Body: "{}"} // the change is not asked yet
	p, err := e.startPlanning(ctx, req)
	if err != nil {
		return err
	}
	for _, step := range []func(context.Context) error{p.readApplication, p.resolveSession, p.resolveTarget, p.checkAccess} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// planning is one Plan being made: the reads in flight and what the steps
// found that the plan does not keep.
type planning struct {
	*Engine
	req  Request
	plan *Plan

	// The first wave: reads that need nothing but the request, started
	// together so that their round trips overlap (a break-glass is timed
	// from the command's start to the fix being live: make bench's T_live).
	whoami    *pending[audit.Actor]
	inSchema  *pending[bool]
	guarded   *pending[bool]
	digestKey *pending[*audit.DigestKey]
	tracking  *pending[argocd.Tracking]
	// The second wave: reads that need the target, started together and
	// checked in a fixed order, so that the first refusal is the same.
	appAllowed, targetAllowed *pending[struct{}]
	contractRead              *pending[drift.Contract]
	parentsRead               *pending[[]argocd.App]
	liveRead                  *pending[*unstructured.Unstructured]

	// status is Argo CD's sync status of the target; contract the target
	// namespace's; client reaches the target.
	status   string
	contract drift.Contract
	client   dynamic.ResourceInterface
}

// startPlanning builds the patch and starts the first wave of reads.
func (e *Engine) startPlanning(ctx context.Context, req Request) (*planning, error) {
	patchType, body, err := req.Patch.Build()
	if err != nil {
		return nil, err
	}
	p := &planning{Engine: e, req: req, plan: &Plan{Request: req, PatchType: patchType, PatchBody: body}}
	p.whoami = start(func() (audit.Actor, error) { return e.Whoami(ctx) })
	p.inSchema = start(func() (bool, error) { _, enabled, err := e.AutomatedSchema(); return enabled, err })
	p.digestKey = start(func() (*audit.DigestKey, error) { return e.digestKey(ctx) })
	p.guarded = start(func() (bool, error) { return e.pauseGuarded(ctx), nil })
	p.tracking = start(func() (argocd.Tracking, error) {
		return e.Tracking(ctx, func() bool { enabled, _ := p.inSchema.wait(); return enabled }), nil
	})
	// The target's resource type is found in the cluster's discovery
	// (kubectl's disk cache, read on first use): read while the
	// Application is, for the Argo CD cluster, where most targets live.
	if kind, _, ok := strings.Cut(req.Target, "/"); ok && e.Mapper != nil {
		gr := schema.ParseGroupResource(kind)
		go func() {
			_, _ = e.Mapper.ResourceFor(schema.GroupVersionResource{Group: gr.Group, Resource: gr.Resource})
		}()
	}
	if store, ok := e.Audit.(interface{ Prefetch(context.Context) }); ok {
		go store.Prefetch(ctx) // where the planned record will go
	}
	return p, nil
}

// readApplication reads the Application and who the caller is.
func (p *planning) readApplication(ctx context.Context) error {
	app, err := p.App(ctx, p.Ref(p.req.App))
	actor, whoErr := p.whoami.wait()
	if whoErr != nil {
		return whoErr
	}
	if err != nil {
		return argocd.NameReader(err, actor.Username)
	}
	p.plan.Actor, p.plan.app, p.plan.Source = actor, app, app.Source()
	p.plan.App = audit.AppRef{Namespace: p.AppNamespace, Name: p.req.App, Project: app.Project()}
	return nil
}

// resolveSession finds the session a --join joins, as the audit log has
// it, and refuses an Application no session may patch now.
func (p *planning) resolveSession(ctx context.Context) error {
	app, req := p.plan.app, p.req
	join, err := joinable(app, req)
	if err != nil {
		return err
	}
	if join == nil && app.AutomatedOff() {
		return fmt.Errorf("%w on %s (automated.enabled: false) and no break-glass session holds it: nothing was changed", ErrSyncOff, req.App)
	}
	if join != nil {
		// A joined patch joins the session the audit log has open there,
		// as the log has it: its saved policy, expiry, state and ticket.
		// Fields of the annotation the log contradicts are named, and the
		// join writes them back from the log; an annotation naming another
		// session, or one the log closed, is no session to join.
		view, err := p.log().view(ctx, audit.AppRef{Namespace: app.GetNamespace(), Name: app.GetName()}, join, false)
		if err != nil {
			return err
		}
		if view.untrusted != "" {
			return fmt.Errorf("%w on %s: %s; nothing was changed", ErrSessionMismatch, req.App, view.untrusted)
		}
		trusted := view.session
		if len(view.mismatch) > 0 {
			p.warn(fmt.Sprintf("%s: %s: patching within session %s as its audit records have it, and writing the annotation back from them", ErrSessionMismatch, strings.Join(view.mismatch, "; "), trusted.ID))
		}
		if trusted.State != StatePatched {
			// As the log has it: an annotation that says otherwise is named
			// above, and cannot turn joins away by itself.
			return fmt.Errorf("%w on %s: session %s by %s is still %s: finish or undo it with `%s`", ErrSessionOpen, req.App, trusted.ID, trusted.OpenedBy, trusted.State, next.Restore(app.GetNamespace(), req.App))
		}
		join = trusted
		if join.pauses() && app.SyncsAutomatically() {
			// Argo CD would revert this patch as it may have the others.
			return fmt.Errorf("%w: automated sync of %s is on again, behind session %s: a patch within it would be reverted; nothing was changed", ErrSyncReenabled, req.App, join.ID)
		}
	}
	if started, running := app.SyncRunning(); running && req.NoTerminate {
		return fmt.Errorf("%w on %s (started %s) and terminating it was not allowed", ErrSyncRunning, req.App, started)
	}
	p.plan.Join = join
	return nil
}

// resolveTarget finds the target's cluster, resource type and namespace,
// and refuses a target the Application does not manage. It then starts
// the second wave of reads.
func (p *planning) resolveTarget(ctx context.Context) error {
	app, req := p.plan.app, p.req
	kindArg, name, ok := strings.Cut(req.Target, "/")
	if !ok || kindArg == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("%w: target %q: use KIND/NAME, e.g. deployment/web", ErrPatchInvalid, req.Target)
	}
	cluster, err := p.ClusterOf(app, req.TargetContext)
	if err != nil {
		return err
	}
	gr := schema.ParseGroupResource(kindArg)
	gvr, err := cluster.Mapper.ResourceFor(schema.GroupVersionResource{Group: gr.Group, Resource: gr.Resource})
	if err != nil {
		return fmt.Errorf("%w: the server has no resource type %q (as in kubectl get %s)", argocd.ErrNotFound, kindArg, kindArg)
	}
	gvk, err := cluster.Mapper.KindFor(gvr)
	if err != nil {
		return err
	}
	namespace := req.Namespace
	if namespace == "" {
		namespace = app.Destination().Namespace
	}
	target := audit.Target{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: namespace, Name: name}
	status, managed := app.ManagedStatus(target)
	if !managed {
		return fmt.Errorf("%w: %s in namespace %s is not one of application %s's managed resources (see kubectl get application %s -n %s -o jsonpath='{.status.resources}')",
			ErrNotManaged, target, namespace, req.App, req.App, p.AppNamespace)
	}
	p.plan.Target, p.plan.TargetOutOfSync, p.status = target, status == "OutOfSync", status
	p.plan.cluster, p.plan.gvr, p.plan.TargetContext = cluster, gvr, cluster.Context
	p.plan.Cluster = app.Destination().Server
	if p.plan.Cluster == "" {
		p.plan.Cluster = cluster.Server
	}
	p.client = cluster.Dynamic.Resource(gvr).Namespace(namespace)
	p.startSecondWave(ctx)
	return nil
}

// startSecondWave starts the reads that need the target: the two access
// reviews, the namespace's contract, the live object and, for a new
// session, the app-of-apps parents (a session holding fields walks them
// again, since a parent's ignoreDifferences then must cover more; a join
// pauses no parent and walks none).
func (p *planning) startSecondWave(ctx context.Context) {
	target, cluster := p.plan.Target, p.plan.cluster
	p.appAllowed = start(func() (struct{}, error) {
		return struct{}{}, allowed(ctx, p.Kube, argocd.ApplicationGVR, p.AppNamespace, p.req.App)
	})
	p.targetAllowed = start(func() (struct{}, error) {
		return struct{}{}, allowed(ctx, cluster.Kube, p.plan.gvr, target.Namespace, target.Name)
	})
	p.contractRead = start(func() (drift.Contract, error) {
		if target.Namespace == "" {
			return drift.Contract{}, nil
		}
		return drift.ContractOf(ctx, cluster.Kube, target.Namespace)
	})
	if p.plan.Join == nil {
		p.parentsRead = start(func() ([]argocd.App, error) {
			t, _ := p.tracking.wait()
			return p.SelfHealingParents(ctx, p.plan.app, t, false)
		})
	}
	p.liveRead = start(func() (*unstructured.Unstructured, error) { return p.client.Get(ctx, target.Name, metav1.GetOptions{}) })
}

// planHold decides how the fix is held, which decides what would undo
// the hold: an ApplicationSet or a parent rewriting the child's sync
// policy and, where fields are held, its ignoreDifferences. The parents
// that would are paused too, so the caller must be allowed to patch them.
func (p *planning) planHold(ctx context.Context) error {
	if p.plan.Join != nil {
		p.plan.Hold = p.plan.Join.Hold
		return nil
	}
	hold, warning, err := holdOf(p.req, p.contract)
	if err != nil {
		return err
	}
	p.warn(warning)
	if err := p.checkApplicationSetOwner(ctx, p.plan.app, holdsFields(hold)); err != nil {
		return err
	}
	var parents []argocd.App
	if holdsFields(hold) {
		tracking, _ := p.tracking.wait()
		parents, err = p.SelfHealingParents(ctx, p.plan.app, tracking, true)
	} else {
		parents, err = p.parentsRead.wait()
	}
	if err != nil {
		return err
	}
	for _, parent := range parents {
		if err := allowed(ctx, p.Kube, argocd.ApplicationGVR, argocd.NamespaceOr(parent.GetNamespace(), p.AppNamespace), parent.GetName()); err != nil {
			return fmt.Errorf("%w (parent application %s self-heals %s and must be paused too)", err, parent.GetName(), p.req.App)
		}
		p.plan.Parents = append(p.plan.Parents, parent.GetName())
	}
	p.plan.Hold, p.plan.parents = hold, parents
	return nil
}

// dryRun computes the change with a server-side dry run against the live
// target, and redacts it as the audit log will.
func (p *planning) dryRun(ctx context.Context) error {
	plan := p.plan
	target := plan.Target
	live, err := p.liveRead.wait()
	if err != nil {
		return fmt.Errorf("reading %s: %w", target, err)
	}
	if len(p.req.Patch.Images) > 0 {
		if plan.PatchBody, err = p.req.Patch.imagePatch(target, live.Object); err != nil {
			return err
		}
	}
	dry, err := p.client.Patch(ctx, target.Name, PatchTypes[plan.PatchType], plan.PatchBody, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: argocd.FieldManager})
	if err != nil {
		red, redErr := redactPatch(target, plan.PatchType, plan.PatchBody, live.Object)
		if redErr != nil {
			return fmt.Errorf("%w: %v", ErrPatchInvalid, redErr)
		}
		return fmt.Errorf("%w: the API server rejects the patch of %s (server-side dry run): %s", ErrPatchInvalid, target, red.redactor.Text(err.Error()))
	}
	// Judged against the object before and after the patch, so that a
	// value is redacted if it is secret in either.
	red, err := redactPatch(target, plan.PatchType, plan.PatchBody, live.Object, dry.Object)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrPatchInvalid, err)
	}
	diff := audit.Diff(live.Object, dry.Object)
	if len(diff) == 0 {
		return fmt.Errorf("%w on %s: it is already live", ErrNothingToDo, target)
	}
	plan.PatchRedacted, plan.redaction, plan.diff, plan.live = red.body, red, diff, live
	plan.Changes = red.changes(target, diff, live.Object, dry.Object)
	plan.fields = patchedFields(target, diff, live.Object, dry.Object)
	plan.Live, plan.Patched = cleanForDiff(target, live.Object), cleanForDiff(target, dry.Object)
	return nil
}

// checkTicket checks the Jira issue of --ticket, or the session's.
func (p *planning) checkTicket(ctx context.Context) error {
	ticket, warning, err := p.Engine.checkTicket(ctx, p.req, p.plan.Join)
	if err != nil {
		return err
	}
	p.plan.Ticket = ticket
	p.warn(warning)
	return nil
}

// planPause computes the sync policy after the pause and where Git stands.
func (p *planning) planPause(context.Context) error {
	plan := p.plan
	before := plan.app.SyncPolicy()
	plan.SyncPolicyBefore, plan.SyncPolicyAfter, plan.Git = before, before, plan.app.Git()
	switch {
	case plan.Join != nil:
		// Already paused: the policy stays as it is, and Git is compared
		// with the revision the session opened at.
		plan.Git = sessionGit(plan.Join)
		plan.PauseMechanism = PauseJoined
	case plan.Hold == HoldFields:
		plan.PauseMechanism = PauseHoldFields
	default:
		// Argo CD ≥ 3.1 (its schema has automated.enabled) can turn
		// automated sync off and keep its settings; removing automated is
		// the fallback every version honours.
		enabled, _ := p.inSchema.wait()
		plan.disableAutomated = enabled
		plan.SyncPolicyAfter = pausedPolicy(before, enabled)
		plan.PauseMechanism = PauseRemoveAutomated
		if enabled {
			plan.PauseMechanism = PauseDisableAutomated
		}
		if plan.guarded, _ = p.guarded.wait(); !plan.guarded {
			p.warn("the admission policy " + PauseGuardPolicy + " is not in force, or on-call may not read it (apply deploy/policy and deploy/rbac): the patch waits for Argo CD's controller to take the pause up first")
		}
	}
	return nil
}

// digest keys a digest of the patch as the user gave it, where the
// install has a digest key; without one the plan says so.
func (p *planning) digest(context.Context) error {
	if _, ok := p.Audit.(digestKeys); !ok {
		return nil
	}
	switch key, err := p.digestKey.wait(); {
	case err != nil:
		p.warn(err.Error() + ": the record keeps no digest of the patch as given")
	case key == nil:
		p.warn("no digest key (" + audit.DigestKeySecret + ", see the README's install): the record keeps no digest of the patch as given")
	default:
		p.plan.PatchHMAC, p.plan.PatchKeyID = key.MAC(rawPatch(p.req.Patch, p.plan.PatchBody)), key.ID
	}
	return nil
}

// warn adds what a check found worth saying but not refusing.
func (p *planning) warn(warning string) {
	if warning != "" {
		p.plan.Warnings = append(p.plan.Warnings, warning)
	}
}

// joinable returns the open session of app that req may join, nil when
// none is open, and an error naming the holder otherwise: a session can be
// joined only once it has patched, and only with --join.
func joinable(app argocd.App, req Request) (*Session, error) {
	value, ok := app.GetAnnotations()[SessionAnnotation]
	if !ok {
		if req.Join {
			return nil, fmt.Errorf("%w on %s to join", ErrNoSession, req.App)
		}
		return nil, nil
	}
	session, err := ParseSession(value)
	if err != nil {
		return nil, fmt.Errorf("%w on %s: the %s annotation is unreadable", ErrSessionOpen, req.App, SessionAnnotation)
	}
	holder := fmt.Sprintf("session %s by %s since %s (state %s)", session.ID, session.OpenedBy, session.OpenedAt.Format(time.RFC3339), session.State)
	switch {
	case !req.Join && session.State != StatePatched:
		return nil, fmt.Errorf("%w on %s: %s: finish or undo it with `%s`", ErrSessionOpen, req.App, holder, next.Restore(app.GetNamespace(), req.App))
	case !req.Join:
		return nil, fmt.Errorf("%w on %s: %s", ErrJoinable, req.App, holder)
	}
	return session, nil // a join checks the state the log has (Plan)
}

// checkSize refuses, before any change, a patch whose session or audit
// record could not be stored.
func (p *Plan) checkSize() error {
	session := Session{Patches: []SessionPatch{{Target: p.Target, Type: p.PatchType, Fields: p.fields}}}
	if p.Join != nil {
		session = *p.Join
		session.Patches = append(append([]SessionPatch(nil), p.Join.Patches...), SessionPatch{Target: p.Target, Type: p.PatchType, Fields: p.fields})
	}
	if b, _ := json.Marshal(session); len(b) > MaxSessionBytes {
		return fmt.Errorf("%w: the patch changes %d fields, too many to track in the session annotation (%d KiB, limit %d KiB): patch fewer fields at once", ErrPatchInvalid, len(p.fields), len(b)>>10, MaxSessionBytes>>10)
	}
	r := audit.Record{Reason: p.Request.Reason, Incident: p.Request.Incident, Target: &p.Target,
		Patch:   p.RecordedPatch(),
		Changes: p.Changes, SyncPolicy: &audit.SyncPolicy{Before: p.SyncPolicyBefore, After: p.SyncPolicyAfter}}
	if b, _ := json.Marshal(r); len(b) > MaxRecordBytes {
		return fmt.Errorf("%w: the patch is too large to record: its audit record would be %d KiB, over the %d KiB a record ConfigMap holds; patch less at once", ErrPatchInvalid, len(b)>>10, MaxRecordBytes>>10)
	}
	return nil
}

// digestKeys is an audit store that holds the key the patch digests are
// made with.
type digestKeys interface {
	DigestKey(context.Context) (*audit.DigestKey, error)
}

// digestKey is the audit store's digest key, nil when it keeps none.
func (e *Engine) digestKey(ctx context.Context) (*audit.DigestKey, error) {
	if keys, ok := e.Audit.(digestKeys); ok {
		return keys.DigestKey(ctx)
	}
	return nil, nil
}

// pending is a value being read in its own goroutine.
type pending[T any] struct {
	done chan struct{}
	v    T
	err  error
}

// subject is what the records of this plan are about.
func (p *Plan) subject() subject {
	return subject{
		actor: p.Actor, app: p.App, cluster: p.Cluster, target: p.Target, git: p.Git,
		reason: p.Request.Reason, incident: p.Request.Incident, allowSecretText: p.Request.AllowSecretText, redact: p.Redact,
	}
}

// start reads a value with f in its own goroutine.
func start[T any](f func() (T, error)) *pending[T] {
	p := &pending[T]{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.v, p.err = f()
	}()
	return p
}

// wait is the value once read.
func (p *pending[T]) wait() (T, error) {
	<-p.done
	return p.v, p.err
}
