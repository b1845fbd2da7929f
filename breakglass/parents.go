package breakglass

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
)

// PausedByAnnotation marks a parent Application paused on behalf of a
// child's session: CHILD/SESSION.
const PausedByAnnotation = audit.KeyPrefix + "paused-by"

// PausedParent is an app-of-apps parent paused with the session, with the
// policy restore writes back.
type PausedParent struct {
	Name string `json:"name"`
	// Namespace is the parent's, when it is not the child's (apps in any
	// namespace).
	Namespace       string          `json:"namespace,omitempty"`
	SavedSyncPolicy json.RawMessage `json:"savedSyncPolicy"`
}

// savedParent is parent's policy as the session keeps it.
func savedParent(parent argocd.App) PausedParent {
	policy := parent.SyncPolicy()
	saved, _ := json.Marshal(policy)
	return PausedParent{Name: parent.GetName(), Namespace: parent.GetNamespace(), SavedSyncPolicy: saved}
}

// pauseParent pauses parent for session, keeping its policy.
// It returns the parent as written.
func (e *Engine) pauseParent(ctx context.Context, parent argocd.App, child string, session *Session, disable bool) (argocd.App, error) {
	policy := parent.SyncPolicy()
	name := parent.GetName()
	return e.Write(ctx, argocd.Known(parent.Ref()), argocd.Write{Check: func(app argocd.App) error {
		if by, ok := app.GetAnnotations()[PausedByAnnotation]; ok {
			return fmt.Errorf("%w: parent application %s is already paused for %s", ErrSessionOpen, name, by)
		}
		if !equalJSON(app.SyncPolicy(), policy) {
			return fmt.Errorf("%w: the sync policy of parent %s changed meanwhile; run the command again", argocd.ErrConflict, name)
		}
		return nil
	}, Patch: func(app argocd.App) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"annotations": argocd.RefreshRequest(map[string]any{PausedByAnnotation: child + "/" + session.ID}, false)},
			"spec":     map[string]any{"syncPolicy": policyPatch(app, pausedPolicy(policy, disable))},
		}
	}})
}

// restoreParents writes back the saved policy of every parent paused for
// session, newest first.
func (e *Engine) restoreParents(ctx context.Context, child audit.AppRef, session *Session) error {
	for i := len(session.PausedParents) - 1; i >= 0; i-- {
		p := session.PausedParents[i]
		var saved any
		if err := json.Unmarshal(p.SavedSyncPolicy, &saved); err != nil {
			return fmt.Errorf("the saved policy of parent %s is unreadable: %w", p.Name, err)
		}
		_, err := e.Write(ctx, argocd.Known(argocd.AppRef{Namespace: argocd.NamespaceOr(p.Namespace, child.Namespace), Name: p.Name}), argocd.Write{Check: func(app argocd.App) error {
			switch by, marked := app.GetAnnotations()[PausedByAnnotation]; {
			case !marked:
				// Never paused (interrupted before) or already restored.
				return errNotPausedHere
			case by != child.Name+"/"+session.ID:
				return fmt.Errorf("%w: parent %s is paused for another session (%q)", argocd.ErrConflict, p.Name, by)
			}
			return nil
		}, Patch: func(app argocd.App) map[string]any {
			return map[string]any{
				"metadata": map[string]any{"annotations": argocd.RefreshRequest(map[string]any{PausedByAnnotation: nil}, false)},
				"spec":     map[string]any{"syncPolicy": policyPatch(app, saved)},
			}
		}})
		if err != nil && !errors.Is(err, errNotPausedHere) {
			return fmt.Errorf("restoring parent %s: %w", p.Name, err)
		}
	}
	return nil
}

// errNotPausedHere is a parent the session lists but never paused (or
// already restored): there is nothing to put back.
var errNotPausedHere = errors.New("not paused by this session")

// OrphanedPauses describes the Applications among apps that carry this
// project's paused-by mark (CHILD/SESSION) that the audit log does not
// account for: the session is not open, was opened on another child, or
// never recorded pausing this Application. Their sync stays off for
// nobody (the mark is set by hand with a pause the admission policy cannot
// tell from a parent's), exactly what a break-glass must never leave
// behind. What the annotations say is not trusted: only the log is.
func (e *Engine) OrphanedPauses(ctx context.Context, apps []argocd.App) ([]string, error) {
	var out []string
	for _, a := range apps {
		by, marked := a.GetAnnotations()[PausedByAnnotation]
		if !marked {
			continue
		}
		why, err := e.unaccounted(ctx, a, by)
		if err != nil {
			return nil, err
		}
		if why == "" {
			continue
		}
		out = append(out, fmt.Sprintf("application %s/%s is marked paused for session %q, %s: its automated sync may stay off for nobody; find its saved policy with `%s`",
			a.GetNamespace(), a.GetName(), by, why, next.AuditLog(a.GetName(), string(audit.EventPaused), true)))
	}
	return out, nil
}

// EventOrphanedReason is the Warning Event of an orphaned pause.
const EventOrphanedReason = "OrphanedPause"

// RecordOrphan records app's orphaned pause (why, as OrphanedPauses says
// it) as a breakglass.orphaned notice outside any session, and emits a
// Warning Event on app; warnings are what could not be told.
func (e *Engine) RecordOrphan(ctx context.Context, app argocd.App, why string) ([]string, error) {
	actor, err := e.Whoami(ctx)
	if err != nil {
		return nil, err
	}
	ref := audit.AppRef{Namespace: app.GetNamespace(), Name: app.GetName()}
	ref.Project = app.Project()
	p := subject{actor: actor, app: ref, cluster: app.Destination().Server, reason: why}
	if _, err := e.record(ctx, p, "", audit.EventOrphaned, audit.Outcome{Status: audit.StatusSucceeded}, func(r *audit.Record) { r.Target = nil }); err != nil {
		return nil, err
	}
	if w := e.emit(ctx, app, EventOrphanedReason, true, "%s", why); w != "" {
		return []string{w}, nil
	}
	return nil, nil
}

// unaccounted says why the log does not account for app's paused-by mark
// by ("" when it does: an open session of the child it names paused app).
func (e *Engine) unaccounted(ctx context.Context, app argocd.App, by string) (string, error) {
	child, id, ok := strings.Cut(by, "/")
	if !ok || id == "" {
		return "which is not open", nil
	}
	records, err := e.log().records(ctx, id)
	if err != nil {
		return "", err
	}
	legal, log := ownLog(records, id)
	switch {
	case log == nil || log.Opened == nil || !log.Open():
		return "which is not open", nil
	case log.Application.Name != child:
		return fmt.Sprintf("which was opened on %s, not %s", log.Application.Name, child), nil
	}
	for _, r := range legal {
		if r.Event == audit.EventPaused && r.Application != nil && r.Application.Name == app.GetName() && r.Application.Namespace == app.GetNamespace() {
			return "", nil
		}
	}
	return "which never recorded pausing it", nil
}
