package plugin

import (
	"fmt"
	"io"
	"strings"

	"github.com/charmbracelet/huh"
)

// confirmApp is every command's confirmation: the user types the
// Application's name, after a line saying what going ahead does. Anything
// else, or an interrupted prompt, changes nothing. out is stderr: stdout
// is the command's data, often redirected to a file.
func confirmApp(in io.Reader, out io.Writer, what, app string) error {
	var typed string
	input := huh.NewInput().Title(fmt.Sprintf("Type the Application name (%s) to go ahead", app)).Description(what).Value(&typed)
	if err := huh.NewForm(huh.NewGroup(input)).WithInput(in).WithOutput(out).Run(); err != nil {
		return fmt.Errorf("not confirmed (%v): nothing was changed", err)
	}
	if strings.TrimSpace(typed) != app {
		return fmt.Errorf("not confirmed: you typed %q, not %q; nothing was changed", typed, app)
	}
	return nil
}
