package plugin

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Set at build time with -ldflags "-X github.com/kubectl-gitops/kubectl-gitops/plugin.version=…".
var (
	version = "v0.0.0-dev"
	commit  = "unknown"
	date    = "unknown"
)

// clientVersion is the stamped version, else the module version `go install
// …@VERSION` records in the binary.
func clientVersion() string {
	if version != "v0.0.0-dev" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return version
}

// VersionInfo is what `kubectl gitops version -o json|yaml` prints. A server
// part that could not be read carries the reason in Error.
type VersionInfo struct {
	Client     ClientVersion  `json:"client"`
	Kubernetes *ServerVersion `json:"kubernetes,omitempty"`
	ArgoCD     *ServerVersion `json:"argocd,omitempty"`
}

// ClientVersion describes this binary.
type ClientVersion struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// ServerVersion is the version of a server, or why it is unknown.
type ServerVersion struct {
	Version string `json:"version,omitempty"`
	Source  string `json:"source,omitempty"`
	Error   string `json:"error,omitempty"`
}

// VersionOptions holds the flags of `kubectl gitops version`.
type VersionOptions struct {
	*Factory
	ClientOnly   bool
	Output       string
	AppNamespace string
	genericiooptions.IOStreams
}

// NewVersionOptions returns options writing to streams.
func NewVersionOptions(factory *Factory) *VersionOptions {
	return &VersionOptions{Factory: factory, IOStreams: factory.streams}
}

// NewCmdVersion returns the version command.
func NewCmdVersion(factory *Factory) *cobra.Command {
	o := NewVersionOptions(factory)
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the client, Kubernetes and Argo CD versions",
		Long: `Print the plugin's version and, when reachable, the Kubernetes API server's and
Argo CD's. Argo CD's version comes from its API server when ARGOCD_SERVER is set,
else from the image tag of the Argo CD workloads in --app-namespace.`,
		Example: `  # Everything that is reachable
  kubectl gitops version

  # Only this binary, without contacting any server
  kubectl gitops version --client

  # For scripts
  kubectl gitops version -o json`,
		Args: positional(0),
		RunE: run(o),
	}
	cmd.Flags().BoolVar(&o.ClientOnly, "client", false, "print only the client version; contact no server")
	cmd.Flags().StringVar(&o.AppNamespace, "app-namespace", "argocd", "namespace where Argo CD runs")
	outputFlag(cmd, &o.Output, "text", "json", "yaml")
	return cmd
}

// Complete has nothing to take: version has no arguments.
func (o *VersionOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate checks the flags.
func (o *VersionOptions) Validate() error {
	return nil
}

// Run collects the versions and prints them. It fails when a server that was
// asked for could not be reached, after printing what it did learn.
func (o *VersionOptions) Run(ctx context.Context) error {
	info := VersionInfo{Client: ClientVersion{
		Version: clientVersion(), Commit: commit, Date: date,
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}}
	if !o.ClientOnly {
		info.Kubernetes, info.ArgoCD = o.serverVersions(ctx)
	}
	if o.Output == "text" {
		o.printText(info)
	} else if err := printStructured(o.Out, o.Output, info); err != nil {
		return err
	}
	if info.Kubernetes != nil && info.Kubernetes.Error != "" {
		return fmt.Errorf("kubernetes api server unreachable: %s (check --kubeconfig and --context, or use --client)", info.Kubernetes.Error)
	}
	return nil
}

func (o *VersionOptions) serverVersions(ctx context.Context) (kube, argo *ServerVersion) {
	kube, argo = &ServerVersion{}, &ServerVersion{}
	config, client, err := kubeClient(o.configFlags)
	if err != nil {
		kube.Error = err.Error()
		argo.Error = "kubernetes not reachable"
		return kube, argo
	}
	if v, err := client.Discovery().ServerVersion(); err != nil {
		kube.Error = err.Error()
	} else {
		kube.Version, kube.Source = v.GitVersion, config.Host
	}
	if server, err := argoServer(""); err == nil && server != nil {
		if v, err := server.Version(ctx); err != nil {
			argo.Error = err.Error()
		} else {
			argo.Version, argo.Source = v, server.URL()
		}
		return kube, argo
	}
	if kube.Error != "" {
		argo.Error = "kubernetes not reachable"
		return kube, argo
	}
	v, err := argocd.VersionFromWorkloads(ctx, client, o.AppNamespace)
	switch {
	case err != nil:
		argo.Error = err.Error()
	case v == "":
		argo.Error = fmt.Sprintf("no Argo CD workloads in namespace %s and ARGOCD_SERVER is not set", o.AppNamespace)
	default:
		argo.Version, argo.Source = v, "image tag in namespace "+o.AppNamespace
	}
	return kube, argo
}

func (o *VersionOptions) printText(info VersionInfo) {
	t := newTable(o.Out)
	t.row("Client:", fmt.Sprintf("%s (commit %s, built %s, %s, %s)", info.Client.Version, info.Client.Commit, info.Client.Date, info.Client.GoVersion, info.Client.Platform))
	for _, s := range []struct {
		name string
		v    *ServerVersion
	}{{"Kubernetes", info.Kubernetes}, {"Argo CD", info.ArgoCD}} {
		switch {
		case s.v == nil:
		case s.v.Error != "":
			t.row(s.name+":", "unknown ("+s.v.Error+")")
		default:
			t.row(s.name+":", s.v.Version)
		}
	}
	_ = t.flush()
}
