package breakglass

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// PauseMechanism is how a break-glass pauses automated sync.
type PauseMechanism int

// The pause mechanisms.
const (
	// PauseJoined is a patch within an open session: its pause stands.
	PauseJoined PauseMechanism = iota
	// PauseHoldFields pauses nothing: the patched fields are held.
	PauseHoldFields
	// PauseRemoveAutomated removes spec.syncPolicy.automated, which every
	// Argo CD version honours.
	PauseRemoveAutomated
	// PauseDisableAutomated sets automated.enabled to false (Argo CD ≥ 3.1).
	PauseDisableAutomated
)

// String says how the pause works, for people and -o json ("" for a join).
func (m PauseMechanism) String() string {
	switch m {
	case PauseHoldFields:
		return "none: automated sync stays on (--hold fields); only the patched fields are held"
	case PauseRemoveAutomated:
		return "remove spec.syncPolicy.automated (this Argo CD's Application schema has no automated.enabled)"
	case PauseDisableAutomated:
		return "set spec.syncPolicy.automated.enabled to false (Argo CD >= 3.1; prune and selfHeal stay visible)"
	}
	return ""
}

// pausedPolicy is the sync policy with automated sync off. With disable
// (Argo CD ≥ 3.1, whose schema has automated.enabled), automated stays and
// gets enabled: false, so prune and selfHeal remain visible; otherwise
// automated is removed, which every version honours. Everything else
// (syncOptions, retry) stays.
func pausedPolicy(policy any, disable bool) any {
	m, ok := policy.(map[string]any)
	if !ok {
		return policy
	}
	paused := map[string]any{}
	for k, v := range m {
		if k != "automated" {
			paused[k] = v
		}
	}
	if automated, ok := m["automated"].(map[string]any); ok && disable {
		off := map[string]any{}
		for k, v := range automated {
			off[k] = v
		}
		off["enabled"] = false
		paused["automated"] = off
	}
	return paused
}

// policyPatch is the merge patch that turns app's spec.syncPolicy into
// desired exactly: members desired lacks are deleted.
func policyPatch(app argocd.App, desired any) any {
	current := app.SyncPolicy()
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

// undoPause writes the saved policies back, the parents' first, and removes
// the session last (as long as check accepts it), so that an interruption
// leaves a session that says what is still paused; closing is the event
// that ends the session, left in the LastSessionAnnotation.
func (e *Engine) undoPause(ctx context.Context, ref audit.AppRef, s *Session, closing audit.Event, check func(argocd.App) error) error {
	// The child's check first: parents syncing again would undo the
	// child's pause from Git, so none is unpaused for a child that is not.
	app, err := e.App(ctx, appRef(ref))
	if err != nil {
		return err
	}
	if err := check(app); err != nil {
		return err
	}
	if err := e.restoreParents(ctx, ref, s); err != nil {
		return err
	}
	return e.restorePolicy(ctx, ref, s, closing, check)
}

// restorePolicy makes spec.syncPolicy the session's saved policy exactly,
// drops the session annotation for the LastSessionAnnotation (closing says
// how it ended) and requests a refresh, in one patch, as long as check
// accepts the Application as it is then. An Application
// whose sync was turned back on behind the session keeps its policy as it
// is (sync is on, as restore would leave it; the admission policy allows
// on-call no other change of it there): only the session goes.
func (e *Engine) restorePolicy(ctx context.Context, ref audit.AppRef, s *Session, closing audit.Event, check func(argocd.App) error) error {
	var saved any
	if err := json.Unmarshal(s.SavedSyncPolicy, &saved); err != nil {
		return fmt.Errorf("the session's saved sync policy is unreadable: %w", err)
	}
	var releaseErr error
	_, err := e.Write(ctx, knownApp(ref), argocd.Write{Check: check, Patch: func(app argocd.App) map[string]any {
		patch := map[string]any{"metadata": map[string]any{"annotations": argocd.RefreshRequest(closeSession(app, closing), false)}}
		whole := !app.SyncsAutomatically()
		// The hold goes with the session: ignoreDifferences (and the sync
		// option, when the policy is not written back whole) as saved.
		spec, err := releasePatch(app, s, whole)
		if err != nil {
			releaseErr = err
			spec = nil
		}
		if whole {
			if spec == nil {
				spec = map[string]any{}
			}
			spec["syncPolicy"] = policyPatch(app, saved)
		}
		if spec != nil {
			patch["spec"] = spec
		}
		return patch
	}})
	if err == nil && releaseErr != nil {
		return releaseErr
	}
	return err
}
