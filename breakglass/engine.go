// Package breakglass is the session engine of kubectl gitops: it plans a
// break-glass, pauses the Application (and the parents that would undo the
// pause), patches the target, files and closes the ticket, decides from the
// verified audit log whether Git has caught up, restores, and records every
// step. What it knows of Argo CD comes from package argocd, the namespace's
// contract from package drift. It never prints and never reads flags:
// callers pass plain values and interfaces and get results back.
package breakglass

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// Engine carries out break-glass sessions, through its argocd.Client on
// the Argo CD cluster, where Applications and the audit log live.
type Engine struct {
	argocd.Client
	Audit audit.Store
	// Tickets files reconcile tickets in Jira; ticket.Off (or nil, Off
	// because not configured) queues them for `ticket sync`.
	Tickets Tickets
	// ArgoUI is the Argo CD web UI's base URL that tickets link to; "" for
	// no link.
	ArgoUI string
	// AfterPause runs right after the pause is recorded, AfterParentPause
	// right after each parent's. Tests use them to stop as a crash would, or
	// to make the patch fail; nil otherwise.
	AfterPause       func(ctx context.Context) error
	AfterParentPause func(ctx context.Context) error
	// Progress hears what Execute has done as it happens (the fix being
	// live comes before the checks that follow it); nil hears nothing.
	Progress func(msg string)
	// EventComponent reports the Engine's Kubernetes Events (EventComponent
	// when ""; the controller's is ControllerEventComponent).
	EventComponent string
}

// refOf names Application name of namespace, "" for the engine's.
func (e *Engine) refOf(namespace, name string) argocd.AppRef {
	return argocd.AppRef{Namespace: argocd.NamespaceOr(namespace, e.AppNamespace), Name: name}
}

// appRef is the Application an audit record names.
func appRef(app audit.AppRef) argocd.AppRef {
	return argocd.AppRef{Namespace: app.Namespace, Name: app.Name}
}

// progress tells Progress, when there is one.
func (e *Engine) progress(format string, args ...any) {
	if e.Progress != nil {
		e.Progress(fmt.Sprintf(format, args...))
	}
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
	// AllowSecretText writes Reason and Incident even when a secret rule
	// finds something in them (redacted, as always); the records say so.
	AllowSecretText bool
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
	// Expires is how long the pause may last: 0 takes the target
	// namespace's max-pause (none: no expiry); longer than it is refused.
	Expires time.Duration
	// AutoRestore restores sync with no person once Git has caught up;
	// nil takes the namespace's contract (default: no).
	AutoRestore *bool
	// Propose marks a new session's fix to be proposed in Git: the
	// in-cluster controller proposes it when no proposal is recorded.
	Propose bool
	// Hold is how a new session holds the fix: HoldApp, HoldSync or
	// HoldFields; "" takes the target namespace's contract, else HoldApp
	// with FieldLevel and HoldSync without. A join keeps its session's.
	Hold string
	// FieldLevel is whether the caller has the Argo CD API configured, so
	// that a held session's catch-up can be judged field by field.
	FieldLevel bool
}

func clientInfo() audit.Client {
	host, _ := os.Hostname()
	c := audit.Client{Host: host, PID: os.Getpid()}
	if u, err := user.Current(); err == nil {
		c.User = u.Username
	}
	return c
}

// subject is what a record is about and who writes it: the actor, the
// Application (its cluster and the target), where Git stood, and the
// reason and incident given, which the record keeps redacted as redact
// says (redact.Text when nil).
type subject struct {
	actor            audit.Actor
	app              audit.AppRef
	cluster          string
	target           audit.Target
	git              audit.Git
	reason, incident string
	allowSecretText  bool
	redact           func(string) string
}

func (s subject) redacted(text string) string {
	if s.redact == nil {
		return redact.Text(text)
	}
	return s.redact(text)
}

// record appends an audit record of subject s for session; nothing
// proceeds when it fails.
func (e *Engine) record(ctx context.Context, s subject, session string, event audit.Event, outcome audit.Outcome, edit func(*audit.Record)) (*audit.Record, error) {
	return e.recordWith(ctx, e.Audit.Append, s, session, event, outcome, edit)
}

// laterAppender is a store that can move its head after an append
// returns (audit.ConfigMapStore), its next write waiting for that.
type laterAppender interface {
	AppendLater(ctx context.Context, r *audit.Record) error
	WaitHead()
}

// recordSoon is record returning once the record is stored, where the
// store can move its head meanwhile: for the records a break-glass writes
// on its way to the fix (the planned one, the pause's).
func (e *Engine) recordSoon(ctx context.Context, s subject, session string, event audit.Event, outcome audit.Outcome, edit func(*audit.Record)) (*audit.Record, error) {
	if store, ok := e.Audit.(laterAppender); ok {
		return e.recordWith(ctx, store.AppendLater, s, session, event, outcome, edit)
	}
	return e.record(ctx, s, session, event, outcome, edit)
}

// auditSettled waits for the audit log's head to name the last record
// this engine wrote (recordSoon).
func (e *Engine) auditSettled() {
	if store, ok := e.Audit.(laterAppender); ok {
		store.WaitHead()
	}
}

func (e *Engine) recordWith(ctx context.Context, appendRecord func(context.Context, *audit.Record) error, s subject, session string, event audit.Event, outcome audit.Outcome, edit func(*audit.Record)) (*audit.Record, error) {
	r := &audit.Record{
		Event: event, Session: session, Actor: s.actor, Client: clientInfo(),
		Reason: s.redacted(s.reason), Incident: s.redacted(s.incident),
		Application: &s.app, Cluster: &audit.Cluster{Server: s.cluster}, Target: &s.target,
		Git: &s.git, Outcome: outcome, TextCheck: confirmedText(s.allowSecretText, textInput{InputReason, s.reason}, textInput{InputIncident, s.incident}),
	}
	if edit != nil {
		edit(r)
	}
	r.Outcome.Error = s.redacted(r.Outcome.Error)
	if err := appendRecord(ctx, r); err != nil {
		return nil, fmt.Errorf("writing the %s audit record (nothing further was done): %w", event, err)
	}
	return r, nil
}
