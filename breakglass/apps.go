package breakglass

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// appPage is how many Applications one list request asks for: a thousand
// Applications come in pages, never in one response.
const appPage = 500

// ListApplications lists the Applications of namespace ("" for all) that
// the label selector (may be "") selects, page by page (limit and
// continue): a thousand Applications never come in one response.
func (e *Engine) ListApplications(ctx context.Context, namespace, selector string) ([]*unstructured.Unstructured, error) {
	client := e.Dynamic.Resource(ApplicationGVR).Namespace(namespace)
	var out []*unstructured.Unstructured
	opts := metav1.ListOptions{LabelSelector: selector, Limit: appPage}
	for {
		list, err := client.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		if list.GetContinue() == "" {
			return out, nil
		}
		opts.Continue = list.GetContinue()
	}
}

// updateSession changes the session annotation (and requests a refresh),
// as long as the annotation still holds this session: change is applied to
// the session as it is now, not as this command last saw it, so that
// concurrent --join patches never drop each other's patch. It returns the
// session as written.
func (e *Engine) updateSession(ctx context.Context, name, id string, change func(*Session)) (*Session, error) {
	written, _, err := e.updateSessionFrom(ctx, e.appKnownAs(name), id, change)
	return written, err
}

// appKnownAs is an Application of the engine's namespace known only by
// name: an update starting from it reads the Application first.
func (e *Engine) appKnownAs(name string) *unstructured.Unstructured {
	return knownByName(e.AppNamespace, name)
}

// knownByName is an Application known only by namespace and name.
func knownByName(namespace, name string) *unstructured.Unstructured {
	known := &unstructured.Unstructured{}
	known.SetNamespace(namespace)
	known.SetName(name)
	return known
}

// updateSessionFrom is updateSession starting from known, the Application
// as last read (see updateAppFrom), also returning the Application as
// written.
func (e *Engine) updateSessionFrom(ctx context.Context, known *unstructured.Unstructured, id string, change func(*Session)) (*Session, *unstructured.Unstructured, error) {
	return e.updateSessionIf(ctx, known, id, nil, change)
}

// updateSessionIf is updateSessionFrom that also writes only while also
// (nil: nothing more) accepts the Application.
func (e *Engine) updateSessionIf(ctx context.Context, known *unstructured.Unstructured, id string, also func(*unstructured.Unstructured) error, change func(*Session)) (*Session, *unstructured.Unstructured, error) {
	var written *Session
	name := known.GetName()
	check := ownSession(name, id)
	if also != nil {
		own := check
		check = func(app *unstructured.Unstructured) error {
			if err := own(app); err != nil {
				return err
			}
			return also(app)
		}
	}
	app, err := e.writeAppFrom(ctx, known, check, func(app *unstructured.Unstructured) map[string]any {
		current, _ := ParseSession(app.GetAnnotations()[SessionAnnotation])
		change(current)
		written = current
		return sessionPatch(current, nil)
	})
	return written, app, err
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
		"annotations": refreshRequest(map[string]any{SessionAnnotation: string(value)}, false),
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
	return e.updateAppFrom(ctx, knownByName(namespace, name), check, build)
}

// updateAppFrom is updateApp starting from known, the Application as the
// caller last read it: when known carries a resourceVersion the first
// attempt is built from it, saving a read; a conflict means it was stale,
// and the next attempt reads the Application again.
func (e *Engine) updateAppFrom(ctx context.Context, known *unstructured.Unstructured, check func(*unstructured.Unstructured) error, build func(*unstructured.Unstructured) map[string]any) error {
	_, err := e.writeAppFrom(ctx, known, check, build)
	return err
}

// writeAppFrom is updateAppFrom returning the Application as written, which
// the next write can start from.
func (e *Engine) writeAppFrom(ctx context.Context, known *unstructured.Unstructured, check func(*unstructured.Unstructured) error, build func(*unstructured.Unstructured) map[string]any) (*unstructured.Unstructured, error) {
	name := known.GetName()
	apps := e.Dynamic.Resource(ApplicationGVR).Namespace(known.GetNamespace())
	for attempt := 0; attempt < 10; attempt++ {
		app := known
		if attempt > 0 || known.GetResourceVersion() == "" {
			var err error
			if app, err = apps.Get(ctx, name, metav1.GetOptions{}); err != nil {
				return nil, err
			}
		}
		if err := check(app); err != nil {
			return nil, err
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
			return nil, err
		}
		written, err := apps.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
		if !apierrors.IsConflict(err) {
			return written, err
		}
	}
	return nil, fmt.Errorf("%w: application %s kept changing while this command ran; run it again", ErrConflict, name)
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
			"metadata": map[string]any{"annotations": refreshRequest(map[string]any{SessionAnnotation: nil}, false)},
			"spec":     map[string]any{"syncPolicy": policyPatch(app, saved)},
		}
	})
}
