package breakglass

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
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
func savedParent(parent *unstructured.Unstructured) PausedParent {
	policy, _, _ := unstructured.NestedFieldCopy(parent.Object, "spec", "syncPolicy")
	saved, _ := json.Marshal(policy)
	return PausedParent{Name: parent.GetName(), Namespace: parent.GetNamespace(), SavedSyncPolicy: saved}
}

// pauseParent pauses parent for session, keeping its policy.
// It returns the parent as written.
func (e *Engine) pauseParent(ctx context.Context, parent *unstructured.Unstructured, child string, session *Session, disable bool) (*unstructured.Unstructured, error) {
	policy, _, _ := unstructured.NestedFieldCopy(parent.Object, "spec", "syncPolicy")
	name := parent.GetName()
	return e.Write(ctx, argocd.Known(argocd.NamespaceOr(parent.GetNamespace(), e.AppNamespace), name), argocd.Write{Check: func(app *unstructured.Unstructured) error {
		if by, ok := app.GetAnnotations()[PausedByAnnotation]; ok {
			return fmt.Errorf("%w: parent application %s is already paused for %s", ErrSessionOpen, name, by)
		}
		if current, _, _ := unstructured.NestedFieldNoCopy(app.Object, "spec", "syncPolicy"); !equalJSON(current, policy) {
			return fmt.Errorf("%w: the sync policy of parent %s changed meanwhile; run the command again", argocd.ErrConflict, name)
		}
		return nil
	}, Patch: func(app *unstructured.Unstructured) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"annotations": argocd.RefreshRequest(map[string]any{PausedByAnnotation: child + "/" + session.ID}, false)},
			"spec":     map[string]any{"syncPolicy": policyPatch(app, pausedPolicy(policy, disable))},
		}
	}})
}

// restoreParents writes back the saved policy of every parent paused for
// session, newest first.
func (e *Engine) restoreParents(ctx context.Context, child string, session *Session) error {
	for i := len(session.PausedParents) - 1; i >= 0; i-- {
		p := session.PausedParents[i]
		var saved any
		if err := json.Unmarshal(p.SavedSyncPolicy, &saved); err != nil {
			return fmt.Errorf("the saved policy of parent %s is unreadable: %w", p.Name, err)
		}
		_, err := e.Write(ctx, argocd.Known(argocd.NamespaceOr(p.Namespace, e.AppNamespace), p.Name), argocd.Write{Check: func(app *unstructured.Unstructured) error {
			switch by, marked := app.GetAnnotations()[PausedByAnnotation]; {
			case !marked:
				// Never paused (interrupted before) or already restored.
				return errNotPausedHere
			case by != child+"/"+session.ID:
				return fmt.Errorf("%w: parent %s is paused for another session (%q)", argocd.ErrConflict, p.Name, by)
			}
			return nil
		}, Patch: func(app *unstructured.Unstructured) map[string]any {
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
// project's paused-by mark for a session that is no longer open: their sync
// stays off for nobody, exactly what a break-glass must never leave behind.
func OrphanedPauses(apps []*unstructured.Unstructured) []string {
	open := map[string]bool{}
	for _, a := range apps {
		if s, err := ParseSession(a.GetAnnotations()[SessionAnnotation]); err == nil {
			open[a.GetName()+"/"+s.ID] = true
		}
	}
	var out []string
	for _, a := range apps {
		by, marked := a.GetAnnotations()[PausedByAnnotation]
		if !marked || open[by] {
			continue
		}
		out = append(out, fmt.Sprintf("application %s/%s is marked paused for session %q, which is not open: its automated sync may stay off for nobody; find its saved policy with `kubectl gitops audit log --app %s --event breakglass.paused -o yaml`",
			a.GetNamespace(), a.GetName(), by, a.GetName()))
	}
	return out
}
