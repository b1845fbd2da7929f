package breakglass

import (
	"errors"
	"fmt"
)

// Errors the plugin maps to messages and exit codes.
var (
	ErrNotFound     = errors.New("not found")
	ErrNotManaged   = errors.New("not managed by the application")
	ErrForbidden    = errors.New("not allowed")
	ErrSessionOpen  = errors.New("a break-glass session is already open")
	ErrConflict     = errors.New("changed by someone else")
	ErrNothingToDo  = errors.New("the patch changes nothing")
	ErrPatchInvalid = errors.New("invalid patch")
	ErrInvalidInput = errors.New("invalid input")
	ErrNotSupported = errors.New("not supported")
	ErrSyncRunning  = errors.New("a sync operation is running")
	// ErrSyncOff is an Application whose automated sync is already off
	// (automated.enabled: false) with no session: there is no pause to
	// make, and the admission policy opens no session on a paused
	// Application (a session on one could be swapped for another).
	ErrSyncOff = errors.New("automated sync is already off")

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
	// ErrAppNotFound is an Application the engine's namespace does not hold.
	ErrAppNotFound = fmt.Errorf("application %w", ErrNotFound)
	// ErrNoSession is a join, or a restore, with no open session.
	ErrNoSession = fmt.Errorf("break-glass session %w", ErrNotFound)
	// ErrTicketNotFound is an existing ticket Jira does not know.
	ErrTicketNotFound = fmt.Errorf("ticket %w", ErrNotFound)
	// ErrContract is a break-glass the namespace's live-state contract
	// does not allow.
	ErrContract = fmt.Errorf("%w by the namespace's live-state contract", ErrForbidden)
	// ErrJoinable is a break-glass on an Application whose open session it
	// could join instead.
	ErrJoinable = fmt.Errorf("%w", ErrSessionOpen)
)

// An Input is something a user gives the engine, named in the engine's
// words. The engine's errors never name command-line flags: the plugin
// spells each Input as the flag that sets it (plugin/hints.go), and adds
// the hints that name flags to the sentinel errors it maps.
type Input string

// The inputs of a break-glass and a restore.
const (
	InputReason        Input = "reason"
	InputTarget        Input = "target"
	InputImage         Input = "image"
	InputReplicas      Input = "replicas"
	InputPatch         Input = "patch"
	InputPatchType     Input = "patch type"
	InputChange        Input = "change"
	InputTicket        Input = "ticket"
	InputTargetContext Input = "target context"
	InputArgoContext   Input = "argocd context"
	InputDebtNote      Input = "debt note"
	InputSession       Input = "session"
	InputVerdict       Input = "verdict"
	InputNote          Input = "note"
)

// InputError is an input the engine refuses before changing anything. It
// is ErrPatchInvalid to errors.Is when the input is the patch (its body,
// type, or a shortcut that builds it), ErrInvalidInput otherwise.
type InputError struct {
	Input Input
	// Value is the input as given ("" when quoting it adds nothing).
	Value string
	// Problem says what is wrong, and what would do, without naming flags.
	Problem string
}

func (e *InputError) Error() string {
	if e.Value != "" {
		return fmt.Sprintf("%s %q: %s", e.Input, e.Value, e.Problem)
	}
	return fmt.Sprintf("%s: %s", e.Input, e.Problem)
}

// Unwrap says which kind of input was refused.
func (e *InputError) Unwrap() error {
	switch e.Input {
	case InputPatch, InputPatchType, InputImage, InputReplicas, InputChange:
		return ErrPatchInvalid
	}
	return ErrInvalidInput
}

func inputError(in Input, value, problem string, args ...any) error {
	return &InputError{Input: in, Value: value, Problem: fmt.Sprintf(problem, args...)}
}
