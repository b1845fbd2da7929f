package breakglass

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
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
	// ArgoNamespace is where Argo CD itself runs: argocd-cm (tracking,
	// installationID) is read there, and a tracking value naming an
	// Application without a namespace names one there, whatever
	// AppNamespace is. "" means AppNamespace.
	ArgoNamespace string
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
	// Progress hears what Execute has done as it happens (the fix being
	// live comes before the checks that follow it); nil hears nothing.
	Progress func(msg string)
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

func (e *Engine) controllerWait() time.Duration {
	if e.ControllerWait == 0 {
		return 30 * time.Second
	}
	return e.ControllerWait
}

// Whoami asks the API server who the caller is.
func (e *Engine) Whoami(ctx context.Context) (audit.Actor, error) { return whoami(ctx, e.Kube) }

// whoami asks kube's API server who the caller is.
func whoami(ctx context.Context, kube kubernetes.Interface) (audit.Actor, error) {
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return audit.Actor{}, fmt.Errorf("asking the API server who you are: %w", err)
	}
	u := review.Status.UserInfo
	return audit.Actor{Username: u.Username, UID: u.UID, Groups: u.Groups}, nil
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

// argoNamespace is the namespace Argo CD runs in.
func (e *Engine) argoNamespace() string {
	return namespaceOr(e.ArgoNamespace, e.AppNamespace)
}
