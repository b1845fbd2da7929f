package plugin

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/spf13/cobra"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/drift"
	"github.com/kubectl-gitops/kubectl-gitops/next"
)

// inputFlags spells each engine input as the flag (or argument) that sets it.
var inputFlags = map[argocd.Input]string{
	breakglass.InputReason:      "--reason",
	breakglass.InputIncident:    "--incident",
	breakglass.InputNote:        "--note",
	breakglass.InputTarget:      "TARGET",
	breakglass.InputImage:       "--image",
	breakglass.InputReplicas:    "--replicas",
	breakglass.InputPatch:       "--patch",
	breakglass.InputPatchType:   "--type",
	breakglass.InputChange:      "the change",
	breakglass.InputTicket:      "--ticket",
	breakglass.InputExpires:     "--expires",
	breakglass.InputAutoRestore: "--auto-restore",
	breakglass.InputHold:        "--hold",
	breakglass.InputSession:     "SESSION",
	breakglass.InputVerdict:     "--approve/--reject",
	breakglass.InputOverturn:    "--overturn",
	argocd.InputTargetContext:   "--target-context",
	argocd.InputArgoContext:     "--argocd-context",
	drift.InputDebtNote:         "--owner/--reason/--review",
}

// inputHints are what to type, for the inputs whose problem the flags say
// best.
var inputHints = map[argocd.Input]string{
	breakglass.InputChange:    "use --image CONTAINER=IMAGE, --replicas N, --patch or --patch-file",
	breakglass.InputPatchType: "--type json takes a JSON array of operations",
}

// allowSecretText is the flag that confirms text the secret check refuses.
const allowSecretText = "allow-secret-text"

// secretTextAdvice ends the refusal of a text that looks like a secret.
// The flag comes last: Execute redacts every error line, and a flag whose
// name says "secret" followed by a word reads as that flag's value
// ("--allow-secret-text [REDACTED] it holds none").
const secretTextAdvice = ", or, if it holds none, pass --" + allowSecretText

// allowSecretTextFlag adds --allow-secret-text, which confirms the texts
// named (the flags a person types text into).
func allowSecretTextFlag(cmd *cobra.Command, allow *bool, texts string) {
	cmd.Flags().BoolVar(allow, allowSecretText, false, "record "+texts+" even if the secret check finds something in them (still redacted; the audit record says so)")
}

// explain turns an engine error into the command line's terms: inputs
// named as their flags, and for each sentinel the next step, naming flags
// and commands. command is the command that failed; app the Application.
func explain(err error, command string, app audit.AppRef) error {
	var done *hinted
	if err == nil || errors.As(err, &done) {
		return err
	}
	if spelt, ok := spelledInput(err); ok {
		return spelt
	}
	restore, force := next.Restore(app.Namespace, app.Name), next.ForceRestore(app.Namespace, app.Name)
	var hint string
	switch {
	case errors.Is(err, argocd.ErrAppNotFound):
		hint = "set --app-namespace if Applications live elsewhere"
	case errors.Is(err, breakglass.ErrNoSession) && command == "breakglass":
		hint = "drop --join to open one"
	case errors.Is(err, breakglass.ErrJoinable):
		hint = "add --join to patch within it, or finish it with `" + restore + "`"
	case errors.Is(err, breakglass.ErrSessionMismatch) && command == "restore":
		hint = "compare with `" + next.AuditLog(app.Name, "", false) + "`, then `" + force + "` restores what the audit log says"
	case errors.Is(err, breakglass.ErrSessionMismatch):
		hint = "finish the session with `" + force + "`, which restores what the audit log says"
	case errors.Is(err, breakglass.ErrSyncOff):
		hint = "Argo CD does not sync it, so it does not revert a live patch; find who turned sync off with `kubectl get application " + app.Name + " -n " + app.Namespace + " -o yaml` before patching"
	case errors.Is(err, breakglass.ErrSyncReenabled):
		hint = "check that the fix is still live, then close the session with `" + force + "`, and break-glass again if it is gone"
	case errors.Is(err, breakglass.ErrRetargeted):
		hint = "point the Application back at the sources the session was opened against (`" + next.AuditLog(app.Name, string(audit.EventPlanned), true) + "` names them in its breakglass.planned record), or `" + force + "`"
	case errors.Is(err, breakglass.ErrSyncRunning):
		hint = "wait for it, or drop --no-terminate to terminate it before patching"
	case errors.Is(err, breakglass.ErrNotCaughtUp):
		hint = "fix Git and run restore again, or --force --reason …"
	case errors.Is(err, breakglass.ErrRejectionStands):
		hint = "pass --overturn, saying in --note why"
	case errors.Is(err, breakglass.ErrTicketNotFound):
		hint = "give --ticket an existing issue, or leave it out to file a new one"
	case errors.Is(err, breakglass.ErrNotReviewer):
		hint = "reviews are the reviewer role's (deploy/rbac/reviewer.yaml, group " + audit.ReviewerGroup + "), never the on-call's"
	case errors.Is(err, drift.ErrContract):
		return err // the namespace's contract refused it, not a role
	case errors.Is(err, argocd.ErrForbidden):
		// Every command's refusal names the role that grants what it
		// lacked: some did, others left people guessing.
		hint = "bind the role that grants it to your user or group: deploy/rbac/oncall.yaml grants what break-glass, restore, propose, status, drift, debt and contract check need of Applications; patching a workload is your cluster's own role"
	default:
		return err
	}
	return withHint(err, fmt.Errorf("%w: %s", err, hint))
}

// spellInput names the input of an engine InputError as its flag; other
// errors are returned as they are. Every command's error goes through it.
func spellInput(err error) error {
	if spelt, ok := spelledInput(err); ok {
		return spelt
	}
	return err
}

// spelledInput is spellInput's answer and whether it changed anything.
// Callers must not compare errors to find out: an error's dynamic type
// may be uncomparable (clientcmd's errors.aggregate is a slice), and
// comparing it panicked on a broken kubeconfig.
func spelledInput(err error) (error, bool) {
	var input *argocd.InputError
	var done *hinted
	if !errors.As(err, &input) || errors.As(err, &done) {
		return err, false
	}
	msg, spelt := inputFlags[input.Input]
	if !spelt {
		// An input added to the engine before its flag is named here:
		// its own name beats an empty one ("error: : …").
		msg = string(input.Input)
	}
	if input.Value != "" {
		msg += fmt.Sprintf(" %q", input.Value)
	}
	msg += ": " + input.Problem
	if hint := inputHints[input.Input]; hint != "" {
		msg += " (" + hint + ")"
	}
	if errors.Is(err, breakglass.ErrSecretText) {
		msg += secretTextAdvice
	}
	return withHint(err, errors.New(msg)), true
}

// withHint keeps the error's identity (errors.Is, errors.As) and shows
// shown's text.
func withHint(original, shown error) error {
	return &hinted{error: shown, original: original}
}

type hinted struct {
	error
	original error
}

func (h *hinted) Unwrap() []error { return []error{h.error, h.original} }

// reach says what to do about a request to the Kubernetes API server that
// never got there, or whose credentials it refused: client-go's chain
// (`Get "https://…": dial tcp …: connect: connection refused`) names no
// next step. What the command was doing stays in front. Every command's
// error goes through it (Execute).
func reach(err error) error {
	var done *hinted
	if err == nil || errors.As(err, &done) {
		return err
	}
	const next = "check that --context (or --kubeconfig, KUBECONFIG) names the right cluster"
	var urlErr *url.Error
	var status *apierrors.StatusError
	var dns *net.DNSError
	var problem string
	switch {
	case errors.As(err, &status) && apierrors.IsUnauthorized(status):
		return withHint(err, fmt.Errorf("%sthe Kubernetes API server refused your credentials (Unauthorized): log in again, or %s and user", doing(err, status), next))
	case !errors.As(err, &urlErr) || !kubernetesPath(urlErr.URL):
		return err
	case errors.Is(err, syscall.ECONNREFUSED):
		problem = "connection refused"
	case errors.As(err, &dns):
		problem = "no such host " + dns.Name
	case urlErr.Timeout():
		problem = "timed out"
	default:
		return err
	}
	server := urlErr.URL
	if u, perr := url.Parse(urlErr.URL); perr == nil {
		server = u.Scheme + "://" + u.Host
	}
	return withHint(err, fmt.Errorf("%scannot reach the Kubernetes API server at %s (%s): %s, and that it is reachable from here", doing(err, urlErr), server, problem, next))
}

// doing is what the command was doing when the request failed, the words
// its error put in front of client-go's ("listing applications: "), or "".
func doing(err, cause error) string {
	prefix, found := strings.CutSuffix(err.Error(), cause.Error())
	if !found {
		return ""
	}
	return prefix
}

// kubernetesPath is whether a request URL is the Kubernetes API's (Argo CD's
// API server answers under /api/v1/applications and the like, Jira under
// /rest/): only those get the kubeconfig's next step.
func kubernetesPath(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	p := u.Path
	return p == "/api" || p == "/apis" || p == "/version" || strings.HasPrefix(p, "/apis/") || strings.HasPrefix(p, "/openapi/") ||
		strings.HasPrefix(p, "/api/v1/namespaces") || strings.HasPrefix(p, "/api/v1/nodes")
}
