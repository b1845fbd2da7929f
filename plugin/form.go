package plugin

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/charmbracelet/huh"

	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
)

// missingInput names what a non-interactive breakglass lacks, "" when
// nothing.
func (o *BreakglassOptions) missingInput() string {
	switch {
	case o.Request.Patch.Empty():
		return "no change given: use --image CONTAINER=IMAGE, --replicas N, --patch or --patch-file"
	case strings.TrimSpace(o.Request.Reason) == "":
		return "--reason is required: say why, e.g. --reason \"5xx spike after 1.2.3\""
	}
	return ""
}

// askMissing fills the change, the reason and the incident with a form on
// the terminal.
func (o *BreakglassOptions) askMissing() error {
	var fields []huh.Field
	kind, value := "image", ""
	if o.Request.Patch.Empty() {
		fields = append(fields,
			huh.NewSelect[string]().Title("What change?").Options(
				huh.NewOption("set a container image", "image"),
				huh.NewOption("set replicas", "replicas"),
				huh.NewOption("a strategic merge patch (JSON or YAML)", "patch"),
			).Value(&kind),
			huh.NewInput().TitleFunc(func() string {
				switch kind {
				case "replicas":
					return "Replicas"
				case "patch":
					return "Patch"
				}
				return "CONTAINER=IMAGE"
			}, &kind).Value(&value).Validate(func(s string) error {
				_, err := changeFrom(kind, s)
				return err
			}),
		)
	}
	if strings.TrimSpace(o.Request.Reason) == "" {
		fields = append(fields, huh.NewInput().Title("Reason (recorded in the audit log)").Value(&o.Request.Reason).Validate(func(s string) error {
			if strings.TrimSpace(s) == "" {
				return errors.New("a reason is required")
			}
			return nil
		}))
		if o.Request.Incident == "" {
			fields = append(fields, huh.NewInput().Title("Incident id (optional)").Value(&o.Request.Incident))
		}
	}
	if len(fields) == 0 {
		return nil
	}
	if err := huh.NewForm(huh.NewGroup(fields...)).WithInput(o.In).WithOutput(o.Out).Run(); err != nil {
		return fmt.Errorf("the form was not completed: %w", err)
	}
	if value != "" {
		spec, err := changeFrom(kind, value)
		if err != nil {
			return usageErrorf("%v", err)
		}
		o.Request.Patch = spec
	}
	return nil
}

// changeFrom turns the form's answer into a patch.
func changeFrom(kind, value string) (breakglass.PatchSpec, error) {
	switch kind {
	case "replicas":
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 32)
		if err != nil || n < 0 {
			return breakglass.PatchSpec{}, errors.New("a whole number, zero or more")
		}
		r := int32(n)
		return breakglass.PatchSpec{Replicas: &r}, nil
	case "patch":
		spec := breakglass.PatchSpec{Type: "strategic", Body: value}
		_, _, err := spec.Build()
		return spec, err
	}
	images, err := breakglass.ParseImages([]string{strings.TrimSpace(value)})
	return breakglass.PatchSpec{Images: images}, err
}

// confirm asks for the Application's name before anything changes.
func (o *BreakglassOptions) confirm(app string) error {
	var typed string
	input := huh.NewInput().Title(fmt.Sprintf("Type the Application name (%s) to go ahead", app)).Value(&typed)
	if err := huh.NewForm(huh.NewGroup(input)).WithInput(o.In).WithOutput(o.Out).Run(); err != nil {
		return fmt.Errorf("not confirmed (%v): nothing was changed", err)
	}
	if strings.TrimSpace(typed) != app {
		return fmt.Errorf("not confirmed: you typed %q, not %q; nothing was changed", typed, app)
	}
	return nil
}
