package plugin

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/proposal"
)

// The environment variables that hold the providers' API tokens: read
// here, sent only in the API's own header, never logged or recorded.
// Each provider's token, and its REST API when it is not the public one
// (GitHub Enterprise, a self-managed GitLab), as the environment names
// them for propose and status alike.
const (
	githubTokenEnv = "GITHUB_TOKEN"
	gitlabTokenEnv = "GITLAB_TOKEN"
	githubAPIEnv   = "GITHUB_API_URL"
	gitlabAPIEnv   = "GITLAB_API_URL"
)

var (
	tokenEnv = map[string]string{"github": githubTokenEnv, "gitlab": gitlabTokenEnv}
	apiEnv   = map[string]string{"github": githubAPIEnv, "gitlab": gitlabAPIEnv}
)

// proposeFlags are the flags that say where a proposal goes; breakglass
// --propose shares them.
type proposeFlags struct {
	Provider string
	APIURL   string
	Project  string
	// projectFlag is the name --project is registered under (drift has
	// a --project of its own, Argo CD's).
	projectFlag string
}

func (f *proposeFlags) add(cmd *cobra.Command) { f.addWithProject(cmd, "project") }

// addWithProject registers the flags, the provider's project under name.
func (f *proposeFlags) addWithProject(cmd *cobra.Command, name string) {
	f.projectFlag = name
	cmd.Flags().StringVar(&f.Provider, "provider", "", "where to open the request: github, gitlab, or none (push the branch only); default: from the repository URL (github.com, gitlab.com), else none")
	cmd.Flags().StringVar(&f.APIURL, "api-url", "", "the provider's REST API (default $GITHUB_API_URL or $GITLAB_API_URL, else https://api.github.com or https://gitlab.com/api/v4; set it for GitHub Enterprise or a self-managed GitLab)")
	cmd.Flags().StringVar(&f.Project, name, "", "the repository on the provider: OWNER/REPO on GitHub, the project path or id on GitLab (default: from the repository URL)")
}

// given is whether any of the flags was set.
func (f *proposeFlags) given() bool { return f.Provider != "" || f.APIURL != "" || f.Project != "" }

// validate checks the flags alone.
func (f *proposeFlags) validate() error {
	switch f.Provider {
	case "", "github", "gitlab", "none":
	default:
		return usageErrorf("--provider is github, gitlab or none, not %q", f.Provider)
	}
	if f.Provider == "none" && (f.APIURL != "" || f.Project != "") {
		return usageErrorf("--api-url and --%s go with --provider github or gitlab", f.projectFlag)
	}
	return nil
}

// provider is the Provider for the Application's repository: the flags
// first, then the repository URL; nil pushes the branch only. The token
// comes from the environment.
func (f *proposeFlags) provider(repoURL string) (proposal.Provider, error) {
	detected, project := proposal.Detect(repoURL)
	name := f.Provider
	if name == "" {
		name = detected
	}
	if f.Project != "" {
		project = f.Project
	}
	api := f.APIURL
	if api == "" {
		api = os.Getenv(apiEnv[name])
	}
	if api == "" {
		api = proposal.DefaultAPI(name)
	}
	switch name {
	case "github":
		token := os.Getenv(githubTokenEnv)
		if token == "" {
			return nil, usageErrorf("set %s to a token that may open pull requests on %s, or pass --provider none to push the branch only", githubTokenEnv, project)
		}
		if project == "" {
			return nil, usageErrorf("--%s OWNER/REPO is needed: the repository URL %s is not on github.com", f.projectFlag, repoURL)
		}
		return proposal.NewGitHub(api, project, token)
	case "gitlab":
		token := os.Getenv(gitlabTokenEnv)
		if token == "" {
			return nil, usageErrorf("set %s to a token that may open merge requests on %s, or pass --provider none to push the branch only", gitlabTokenEnv, project)
		}
		if project == "" {
			return nil, usageErrorf("--%s GROUP/NAME is needed: the repository URL %s is not on gitlab.com", f.projectFlag, repoURL)
		}
		return proposal.NewGitLab(api, project, token)
	}
	return nil, nil
}

// ProposeOptions holds the flags of `kubectl gitops propose`.
type ProposeOptions struct {
	engineFlags
	proposeFlags
	Request breakglass.ProposeRequest
	Output  string
	genericiooptions.IOStreams
}

// NewCmdPropose returns the propose command.
func NewCmdPropose(factory *Factory) *cobra.Command {
	o := &ProposeOptions{engineFlags: engineFlags{Factory: factory}, IOStreams: factory.streams}
	cmd := &cobra.Command{
		Use:   "propose APP",
		Short: "Write the open session's live fix into Git as a pull or merge request",
		Long: `Propose the Git change that makes the Application's source render the live fix
of its open break-glass session: every patched field's live value (checked
against the digest the session's audit record keeps) is written into the YAML
document that defines the object, in place, keeping comments, key order and
formatting. The edited source is verified before anything is pushed: it renders
the live values at the patched paths and every other object and field as before.
The change is pushed with your own Git credentials (git's credential helpers,
the SSH agent) to the branch kubectl-gitops/SESSION, and a GitHub pull request
(token in GITHUB_TOKEN) or GitLab merge request (GITLAB_TOKEN) is opened. It is
recorded as breakglass.proposed and linked from the session's ticket. Once it is
merged and Argo CD has caught up, restore (or the controller) turns sync back on.

Plain manifests, kustomize overlays and Helm charts in Git are proposed. In an
overlay an image goes through images:, replicas through replicas:, any other field
through a JSON 6902 patch file added to patches:. In a chart the value that renders
the field is edited in the value file that wins for it, where rendering the chart
(with helm from PATH) with that value changed changes that field alone; otherwise
the field is refused. With several sources, the one that renders every patched
object gets the change; with the source hydrator, its dry source does. A chart
from a Helm repository, overrides in the Application's spec.source.kustomize, a
config management plugin, or a targetRevision that is not a branch are refused,
saying what to change by hand.`,
		Example: `  # a pull request on the repository's GitHub (from spec.source.repoURL)
  GITHUB_TOKEN=... kubectl gitops propose web
  # see the change and the checks; push nothing
  kubectl gitops propose web --dry-run
  # a self-managed GitLab
  GITLAB_TOKEN=... kubectl gitops propose web --provider gitlab --api-url https://git.example/api/v4 --project ops/deploy
  # push the branch only
  kubectl gitops propose web --provider none`,
		Args:              positional(1, "APP"),
		ValidArgsFunction: o.completeApplications(true),
		RunE:              run(o),
	}
	o.addAppNamespace(cmd)
	o.addEngineFlags(cmd)
	o.proposeFlags.add(cmd)
	cmd.Flags().BoolVar(&o.Request.DryRun, "dry-run", false, "compute and verify the change and print it; push nothing, open nothing, record nothing")
	outputFlag(cmd, &o.Output, "text", "json", "yaml")
	return cmd
}

// Complete takes APP.
func (o *ProposeOptions) Complete(_ *cobra.Command, args []string) error {
	o.Request.App = arg(args, 0)
	return nil
}

func (o *ProposeOptions) appRef() audit.AppRef {
	return audit.AppRef{Namespace: o.AppNamespace, Name: o.Request.App}
}

// Validate checks the flags.
func (o *ProposeOptions) Validate() error {
	return o.proposeFlags.validate()
}

// Run proposes and reports.
func (o *ProposeOptions) Run(ctx context.Context) (err error) {
	engine, err := o.engineFlags.engine()
	if err != nil {
		return err
	}
	return propose(ctx, engine, o.proposeFlags, o.Request, o.Output, o.IOStreams)
}

// propose finds where app's proposal goes, proposes and prints it; shared
// by propose and breakglass --propose.
func propose(ctx context.Context, engine *breakglass.Engine, flags proposeFlags, req breakglass.ProposeRequest, output string, streams genericiooptions.IOStreams) error {
	req.ProviderFor = flags.provider
	p, err := engine.Propose(ctx, req)
	return printProposed(p, err, output, streams)
}

// printProposed prints what a proposal pushed (or would), its warnings
// first; err is the proposal's.
func printProposed(p *breakglass.Proposed, err error, output string, streams genericiooptions.IOStreams) error {
	if p != nil {
		for _, w := range p.Warnings {
			warn(streams.ErrOut, w)
		}
	}
	if err != nil {
		return err
	}
	if output != "text" {
		return printStructured(streams.Out, output, p)
	}
	fmt.Fprint(streams.Out, p.Diff)
	switch {
	case p.DryRun:
		fmt.Fprintf(streams.Out, "would push branch %s onto %s of %s and propose %d change(s); verified: the edited source renders the live values and nothing else changes (dry run: nothing was pushed)\n",
			p.Proposal.Branch, p.Proposal.Base, p.Proposal.RepoURL, len(p.Changes))
	case p.Proposal.URL != "":
		fmt.Fprintf(streams.Out, "pushed %s (%s) and opened %s: %s\n", p.Proposal.Branch, shortCommit(p.Proposal.Commit), proposalColumn(&p.Proposal, ""), p.Proposal.URL)
	default:
		fmt.Fprintf(streams.Out, "pushed %s (%s) to %s: open a request to merge it into %s\n", p.Proposal.Branch, shortCommit(p.Proposal.Commit), p.Proposal.RepoURL, p.Proposal.Base)
	}
	return nil
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return strings.TrimSpace(c)
}
