package breakglass

import (
	"errors"
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
	ErrNotSupported = errors.New("not supported")
	ErrSyncRunning  = errors.New("a sync operation is running")

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
