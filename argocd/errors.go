package argocd

import (
	"errors"
	"fmt"
)

// The general errors every engine package (argocd, drift, breakglass)
// returns, wrapped with what happened; the plugin maps them, and the more
// precise sentinels the other packages wrap them in, to hints and exit
// codes.
var (
	ErrNotFound     = errors.New("not found")
	ErrConflict     = errors.New("changed by someone else")
	ErrNotSupported = errors.New("not supported")
	ErrForbidden    = errors.New("not allowed")
	ErrInvalidInput = errors.New("invalid input")
)

// An Input is something a user gives the engine, named in the engine's
// words. The engine's errors never name command-line flags: the plugin
// spells each Input as the flag that sets it (plugin/hints.go), and adds
// the hints that name flags to the sentinel errors it maps. Each package
// names the inputs it reads.
type Input string

// The inputs this package reads.
const (
	InputTargetContext Input = "target context"
	InputArgoContext   Input = "argocd context"
)

// InputError is an input the engine refuses before changing anything.
type InputError struct {
	Input Input
	// Value is the input as given ("" when quoting it adds nothing).
	Value string
	// Problem says what is wrong, and what would do, without naming flags.
	Problem string
	// Kind is the sentinel errors.Is finds: ErrInvalidInput when nil.
	Kind error
}

func (e *InputError) Error() string {
	if e.Value != "" {
		return fmt.Sprintf("%s %q: %s", e.Input, e.Value, e.Problem)
	}
	return fmt.Sprintf("%s: %s", e.Input, e.Problem)
}

// Unwrap says which kind of input was refused.
func (e *InputError) Unwrap() error {
	if e.Kind != nil {
		return e.Kind
	}
	return ErrInvalidInput
}

// Invalid is an InputError of kind ErrInvalidInput.
func Invalid(in Input, value, problem string, args ...any) error {
	return &InputError{Input: in, Value: value, Problem: fmt.Sprintf(problem, args...)}
}
