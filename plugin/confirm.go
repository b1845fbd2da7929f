package plugin

import (
	"fmt"
	"io"
	"strings"

	"github.com/charmbracelet/huh"
)

// confirmTyped is every command's confirmation: the user types want (the
// thing named by what it is, as "Application name"), after a line saying
// what going ahead does. Anything else, or an interrupted prompt, changes
// nothing. out is stderr: stdout is the command's data, often redirected
// to a file.
func confirmTyped(in io.Reader, out io.Writer, what, thing, want string) error {
	var typed string
	input := huh.NewInput().Title(fmt.Sprintf("Type the %s (%s) to go ahead", thing, want)).Description(what).Value(&typed)
	if err := huh.NewForm(huh.NewGroup(input)).WithInput(in).WithOutput(out).Run(); err != nil {
		return fmt.Errorf("not confirmed (%v): nothing was changed", err)
	}
	if strings.TrimSpace(typed) != want {
		return fmt.Errorf("not confirmed: you typed %q, not %q; nothing was changed", typed, want)
	}
	return nil
}

// confirmApp confirms a change to an Application by its name.
func confirmApp(in io.Reader, out io.Writer, what, app string) error {
	return confirmTyped(in, out, what, "Application name", app)
}
