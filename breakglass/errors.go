package breakglass

import (
	"errors"
	"fmt"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
)

// Errors of the session engine the plugin maps to messages and exit codes;
// the general ones (not found, conflict, forbidden, not supported, invalid
// input) are argocd's.
var (
	ErrNotManaged   = errors.New("not managed by the application")
	ErrSessionOpen  = errors.New("a break-glass session is already open")
	ErrNothingToDo  = errors.New("the patch changes nothing")
	ErrPatchInvalid = errors.New("invalid patch")
	ErrSyncRunning  = errors.New("a sync operation is running")
	// ErrSyncOff is an Application whose automated sync is already off
	// (automated.enabled: false) with no session: there is no pause to
	// make, and the admission policy opens no session on a paused
	// Application (a session on one could be swapped for another).
	ErrSyncOff = errors.New("automated sync is already off")
	// ErrSyncReenabled is a restore, or a --join, of a session whose
	// Application syncs automatically again: the pause was undone behind
	// the session.
	ErrSyncReenabled = errors.New("automated sync was re-enabled behind the session")
	// ErrRetargeted is a restore of a session whose Application renders
	// from other sources (or to another destination or project) than the
	// session was opened against: Git caught up there proves nothing.
	ErrRetargeted = errors.New("the application was repointed behind the session")

	// ErrSessionMismatch is a session annotation that disagrees with the
	// session's own audit records. The annotation can be edited by anyone who
	// may patch the Application; the records cannot (deploy/policy).
	ErrSessionMismatch = errors.New("the session annotation disagrees with its audit records")

	// ErrOwnedByApplicationSet is returned when pausing an Application would be
	// undone by the ApplicationSet that generates it.
	ErrOwnedByApplicationSet = errors.New("owned by an ApplicationSet that would undo the pause")

	// ErrPatchTooLarge is a patch over MaxPatchBytes.
	ErrPatchTooLarge = errors.New("the patch is over the 1 MiB limit")

	// ErrNotCaughtUp is returned by Restore when restoring would revert the fix.
	ErrNotCaughtUp = errors.New("git has not caught up with the live fix")

	// ErrTargetChanged is a target that changed between the plan and the patch
	// in a way that changes what the patch does (a list index now naming
	// another item, a value someone else set).
	ErrTargetChanged = errors.New("the target changed since the plan")
)

// More precise sentinels, each wrapping a general one above.
var (
	// ErrNoSession is a join, or a restore, with no open session.
	ErrNoSession = fmt.Errorf("break-glass session %w", argocd.ErrNotFound)
	// ErrTicketNotFound is an existing ticket Jira does not know.
	ErrTicketNotFound = fmt.Errorf("ticket %w", argocd.ErrNotFound)
	// ErrJoinable is a break-glass on an Application whose open session it
	// could join instead.
	ErrJoinable = fmt.Errorf("%w", ErrSessionOpen)
)

// The inputs of a break-glass, a restore and a review (argocd.Input).
const (
	InputReason      argocd.Input = "reason"
	InputTarget      argocd.Input = "target"
	InputImage       argocd.Input = "image"
	InputReplicas    argocd.Input = "replicas"
	InputPatch       argocd.Input = "patch"
	InputPatchType   argocd.Input = "patch type"
	InputChange      argocd.Input = "change"
	InputTicket      argocd.Input = "ticket"
	InputSession     argocd.Input = "session"
	InputVerdict     argocd.Input = "verdict"
	InputOverturn    argocd.Input = "overturn"
	InputNote        argocd.Input = "note"
	InputIncident    argocd.Input = "incident"
	InputExpires     argocd.Input = "expiry"
	InputAutoRestore argocd.Input = "auto-restore"
	InputHold        argocd.Input = "hold"
)

// inputError refuses an input: as ErrPatchInvalid when it is the patch
// (its body, type, or a shortcut that builds it), else argocd.ErrInvalidInput.
func inputError(in argocd.Input, value, problem string, args ...any) error {
	e := &argocd.InputError{Input: in, Value: value, Problem: fmt.Sprintf(problem, args...)}
	switch in {
	case InputPatch, InputPatchType, InputImage, InputReplicas, InputChange:
		e.Kind = ErrPatchInvalid
	}
	return e
}
