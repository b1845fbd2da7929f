package plugin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/charmbracelet/huh"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/next"
)

// missingInput names what a non-interactive breakglass lacks, "" when
// nothing.
func (o *BreakglassOptions) missingInput() string {
	switch {
	case o.Request.App == "":
		return "missing APP and TARGET: " + next.Breakglass("APP", "KIND/NAME") + " (in a terminal, leave them out to pick them)"
	case o.Request.Target == "":
		return "missing TARGET: " + next.Breakglass(o.Request.App, "KIND/NAME") + ", naming one of its managed resources (in a terminal, leave it out to pick it)"
	case o.Request.Patch.Empty():
		return "no change given: use --image CONTAINER=IMAGE, --replicas N, --patch or --patch-file"
	case strings.TrimSpace(o.Request.Reason) == "":
		return "--reason is required: say why, e.g. --reason \"5xx spike after 1.2.3\""
	}
	return ""
}

// pickTarget asks for the Application and then for one of its managed
// resources, when they were not given.
func (o *BreakglassOptions) pickTarget(ctx context.Context, engine *breakglass.Engine) error {
	if o.Request.App == "" {
		candidates, err := engine.Candidates(ctx)
		if err != nil {
			return err
		}
		if len(candidates) == 0 {
			return fmt.Errorf("no applications in namespace %s: set --app-namespace to where Applications live", engine.AppNamespace)
		}
		var options []huh.Option[string]
		for _, c := range candidates {
			label := fmt.Sprintf("%s  (project %s, %s, %s)", c.Name, dash(c.Project), dash(c.Sync), dash(c.Health))
			if c.Session != "" {
				label += "  session " + c.Session + " open"
			}
			options = append(options, huh.NewOption(label, c.Name))
		}
		pick := huh.NewSelect[string]().Title("Which Application? (/ filters)").Options(options...).Height(12).Value(&o.Request.App)
		if err := o.runForm(pick); err != nil {
			return err
		}
	}
	if o.Request.Target == "" {
		resources, err := engine.ManagedResources(ctx, o.Request.App)
		if err != nil {
			return err
		}
		var options []huh.Option[int]
		for i, r := range resources {
			state := dash(r.Sync)
			if r.Health != "" { // Argo CD 3.x keeps per-resource health out of status.resources
				state += ", " + r.Health
			}
			options = append(options, huh.NewOption(fmt.Sprintf("%s %s/%s  (%s)", r.Target.Kind, dash(r.Target.Namespace), r.Target.Name, state), i))
		}
		var chosen int
		pick := huh.NewSelect[int]().Title("Which resource of " + o.Request.App + "? (/ filters)").Options(options...).Height(12).Value(&chosen)
		if err := o.runForm(pick); err != nil {
			return err
		}
		o.Request.Target, o.Request.Namespace = resources[chosen].Arg(), resources[chosen].Target.Namespace
	}
	return nil
}

// changesOf are the changes the form offers for target (KIND/NAME): a
// container image where the kind has a pod template, replicas where it
// scales, a patch always. A ConfigMap was offered an image and replicas.
func changesOf(target string) []huh.Option[string] {
	kind, _, _ := strings.Cut(strings.ToLower(target), "/")
	kind, _, _ = strings.Cut(kind, ".")
	scales := map[string]bool{"deployment": true, "deployments": true, "deploy": true, "statefulset": true, "statefulsets": true, "sts": true,
		"replicaset": true, "replicasets": true, "rs": true}
	templated := map[string]bool{"daemonset": true, "daemonsets": true, "ds": true, "job": true, "jobs": true, "cronjob": true, "cronjobs": true, "cj": true,
		"pod": true, "pods": true, "po": true}
	var out []huh.Option[string]
	if scales[kind] || templated[kind] {
		out = append(out, huh.NewOption("set a container image", "image"))
	}
	if scales[kind] {
		out = append(out, huh.NewOption("set replicas", "replicas"))
	}
	return append(out, huh.NewOption("a strategic merge patch (JSON or YAML)", "patch"))
}

func (o *BreakglassOptions) runForm(fields ...huh.Field) error {
	if err := huh.NewForm(huh.NewGroup(fields...)).WithInput(o.In).WithOutput(o.ErrOut).Run(); err != nil {
		return fmt.Errorf("the form was not completed (%v): nothing was changed", err)
	}
	return nil
}

// askMissing fills the change, the reason and the incident with a form on
// the terminal.
func (o *BreakglassOptions) askMissing() error {
	var fields []huh.Field
	changes := changesOf(o.Request.Target)
	kind, value := changes[0].Value, ""
	if o.Request.Patch.Empty() {
		fields = append(fields,
			huh.NewSelect[string]().Title("What change?").Options(changes...).Value(&kind),
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
			return o.checkText(breakglass.InputReason, s)
		}))
		if o.Request.Incident == "" {
			fields = append(fields, huh.NewInput().Title("Incident id (optional)").Value(&o.Request.Incident).Validate(func(s string) error {
				return o.checkText(breakglass.InputIncident, s)
			}))
		}
	}
	if len(fields) == 0 {
		return nil
	}
	if err := o.runForm(fields...); err != nil {
		return err
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

// confirm asks for the Application's name before anything changes. The
// plan is "above" only where the person sees it: printed as text on a
// terminal, not redirected or written as -o json|yaml.
func (o *BreakglassOptions) confirm(app string) error {
	what := "The plan above pauses its automated sync and patches the live resource."
	if o.Output != "text" || !isTerminal(o.Out) {
		what = fmt.Sprintf("This break-glass pauses the automated sync of %s and patches the live resource (the plan went to standard output).", app)
	}
	return confirmApp(o.In, o.ErrOut, what, app)
}

// checkText refuses, as the form is filled in, text that the engine would
// refuse as holding a secret, unless --allow-secret-text confirmed it.
func (o *BreakglassOptions) checkText(in argocd.Input, s string) error {
	if o.Request.AllowSecretText {
		return nil
	}
	return spellInput(breakglass.CheckText(in, s))
}
