package breakglass

import (
	"context"
	"fmt"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// patchTarget applies the plan's patch with the target's resourceVersion as
// precondition. When the target changed meanwhile (the API server answers
// Conflict), the patch is planned again against what is there now: if it
// still changes exactly the same fields the same way, it is sent with the
// new resourceVersion; otherwise nothing is patched. The plan's changes are
// then what the API server's answer to the real patch shows.
func (e *Engine) patchTarget(ctx context.Context, x *execution) error {
	client := x.cluster.Dynamic.Resource(x.gvr).Namespace(x.Target.Namespace)
	version, live := x.live.GetResourceVersion(), x.live.Object
	for attempt := 0; attempt < 5; attempt++ {
		body, err := withResourceVersion(x.PatchType, x.PatchBody, version)
		if err != nil {
			return err
		}
		patched, err := client.Patch(ctx, x.Target.Name, PatchTypes[x.PatchType], body, metav1.PatchOptions{FieldManager: argocd.FieldManager})
		if err == nil {
			x.recordAnswer(live, patched)
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		current, err := client.Get(ctx, x.Target.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading %s again: %w", x.Target, err)
		}
		dry, err := client.Patch(ctx, x.Target.Name, PatchTypes[x.PatchType], x.PatchBody, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: argocd.FieldManager})
		if err != nil {
			return fmt.Errorf("%w: the API server now rejects the patch (server-side dry run): %v", ErrTargetChanged, err)
		}
		if diff := audit.Diff(current.Object, dry.Object); !equalJSON(diff, x.patch.diff) {
			return fmt.Errorf("%w: %s was changed by someone else and the patch would now change other fields or values; nothing was patched: run the command again to see the new plan", ErrTargetChanged, x.Target)
		}
		version, live = current.GetResourceVersion(), current.Object
	}
	return fmt.Errorf("%w: %s kept changing while this command ran; run it again", argocd.ErrConflict, x.Target)
}

// recordAnswer makes the run's changes those the API server's answer to
// the real patch shows, redacted like the plan's.
func (x *execution) recordAnswer(live map[string]any, patched *unstructured.Unstructured) {
	diff := audit.Diff(live, patched.Object)
	if len(diff) == 0 {
		return
	}
	x.patch = answer{
		diff:    diff,
		changes: x.redaction.changes(x.Target, diff, live, patched.Object),
		fields:  patchedFields(x.Target, diff, live, patched.Object),
	}
}
