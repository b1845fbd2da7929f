package breakglass

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// The reasons of the Kubernetes Events a session's state changes emit on
// its Application, so that `kubectl events`, Argo CD's UI and every event
// exporter see them.
const (
	EventOpened   = "BreakGlassOpened"
	EventPatched  = "Patched"
	EventJoined   = "Joined"
	EventRestored = "Restored"
	EventForced   = "Forced"
)

// Who reports the Events: the command a person runs, or the in-cluster
// controller. The admission policy lets only the controller's
// ServiceAccount report as the controller, so its Events can be told from
// any a member of the break-glass group could write (deploy/policy).
const (
	EventComponent           = "kubectl-gitops"
	ControllerEventComponent = "kubectl-gitops-controller"
)

// emit writes a Kubernetes Event on app, of type Normal, or Warning when
// warning is set. An Event is a notice, never the record: the audit log
// is. So it is redacted like everything shown, and one that cannot be
// written (no rights to create events) is a warning the caller returns,
// never a failure.
func (e *Engine) emit(ctx context.Context, app argocd.App, reason string, warning bool, format string, args ...any) string {
	if app.Unstructured == nil {
		return ""
	}
	kind := corev1.EventTypeNormal
	if warning {
		kind = corev1.EventTypeWarning
	}
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		// Named as client-go's event recorder names them.
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", app.GetName(), now.UnixNano()), Namespace: app.GetNamespace()},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: argocd.ApplicationGVR.GroupVersion().String(), Kind: "Application",
			Namespace: app.GetNamespace(), Name: app.GetName(), UID: app.GetUID(), ResourceVersion: app.GetResourceVersion(),
		},
		Reason: reason, Message: redact.Text(fmt.Sprintf(format, args...)), Type: kind,
		Source:         corev1.EventSource{Component: e.eventComponent()},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: e.eventComponent(), ReportingInstance: clientInfo().Host,
	}
	if _, err := e.Kube.CoreV1().Events(app.GetNamespace()).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		return fmt.Sprintf("could not emit the %s event on application %s (%v): the audit log has it", reason, app.GetName(), argocd.Brief(err))
	}
	return ""
}

// eventComponent is the component the engine's Events are reported by.
func (e *Engine) eventComponent() string {
	if e.EventComponent != "" {
		return e.EventComponent
	}
	return EventComponent
}

// Notify emits an Event on app as the engine's component (see emit); a
// failure to write it is logged by the caller through its return.
func (e *Engine) Notify(ctx context.Context, app argocd.App, reason string, warning bool, format string, args ...any) string {
	return e.emit(ctx, app, reason, warning, format, args...)
}
