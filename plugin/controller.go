package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/controller"
	"github.com/kubectl-gitops/kubectl-gitops/proposal"
)

// ControllerOptions holds the flags of `kubectl gitops controller`.
type ControllerOptions struct {
	engineFlags
	AllNamespaces  bool
	LeaseNamespace string
	LeaseName      string
	LeaseDuration  time.Duration
	Identity       string
	Address        string
	Resync         time.Duration
	RefreshEvery   time.Duration
	RemindEvery    time.Duration
	mirror         mirrorFlags
	// MirrorRetention locks each mirrored record in compliance mode.
	MirrorRetention time.Duration
	// AcceptUnlocked mirrors to a bucket without versioning or Object Lock.
	AcceptUnlocked bool
	MirrorEvery    time.Duration
	// CheckpointKey is the file of the ed25519 key checkpoints are signed
	// with (a mounted Secret); "" signs none.
	CheckpointKey string
	// TSA is the RFC 3161 timestamp authority that timestamps checkpoints.
	TSA                string
	CheckpointRecords  uint64
	CheckpointInterval time.Duration
	// PruneAfter is the cluster's retention of audit records (0: keep
	// every record).
	PruneAfter time.Duration
	// ProposeAfter, ProposeAttempts: when and how often the controller
	// proposes a session marked --propose that has no proposal (0
	// attempts: never); proposeTo the provider for all repositories ("":
	// from each URL) and proposeProjects each repository's project there.
	ProposeAfter    time.Duration
	ProposeAttempts int
	proposeTo       string
	proposeProjects map[string]string
	// gitHosts are the hosts GIT_TOKEN may be sent to.
	gitHosts []string
	genericiooptions.IOStreams
}

// The environment the controller pushes proposals with: a token with
// write access to the repositories (GIT_TOKEN, from a Secret), sent over
// HTTPS with GIT_USERNAME (default x-access-token). Its pull or merge
// requests take GITHUB_TOKEN or GITLAB_TOKEN, as propose does.
const (
	gitTokenEnv    = "GIT_TOKEN"
	gitUsernameEnv = "GIT_USERNAME"
)

// NewCmdController returns the controller command.
func NewCmdController(factory *Factory) *cobra.Command {
	o := &ControllerOptions{engineFlags: engineFlags{Factory: factory}, IOStreams: factory.streams}
	cmd := &cobra.Command{
		Use:         "controller",
		Annotations: map[string]string{keepsClientLogs: "its log"},
		Short:       "Run in the cluster: restore auto-restore sessions once Git has caught up",
		Long: `Run as a long-lived process, meant for a Deployment under its own
ServiceAccount (see docs/controller.md). It watches Applications
through a shared informer and, for every open break-glass session marked
auto-restore (breakglass --auto-restore, or the namespace's
kubectl-gitops.io/auto-restore), restores it as soon as Git has caught up, by
exactly the rule restore uses (field by field with ARGOCD_SERVER set), recorded
as breakglass.restored by the controller's identity, the ticket commented and
closed (with JIRA_* in its environment; else queued for ticket sync). It
records, once per session, a pause that expired with Git behind and sync
turned back on behind a session (breakglass.expired, breakglass.reenabled),
with a Warning Event and a ticket comment, and never re-enables sync for
them. Replicas elect a leader through a coordination.k8s.io Lease: only the
leader acts. It serves /metrics, /healthz and /readyz on --address.

With --mirror the leader also copies every audit record, as the exact bytes
stored, in order, to an S3-compatible bucket (one object per record, locked in
compliance mode for --mirror-retention), and with --checkpoint-key signs a
checkpoint every --checkpoint-records records or --checkpoint-interval into the
mirror and the cluster. The bucket must have versioning and Object Lock unless
--mirror-accept-unlocked (docs/audit.md, The mirror). With --prune-after the leader
deletes from the cluster the records older than that, once the mirror, read
back, holds each under a compliance-mode lock and a checkpoint signed at the
last of them; an open session's records stay. Credentials come from the
environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, from a Secret), the
shared files, or the pod's web identity (IRSA); never from a flag.

A session opened with breakglass --propose whose fix has no proposal recorded
--propose-after after it opened (the break-glass run failed to propose, or was
killed) is proposed by the controller, as kubectl gitops propose does: in
process (the image has no git), pushed over HTTPS with GIT_TOKEN (and
GIT_USERNAME, default x-access-token) from a Secret, the pull or merge request
opened with GITHUB_TOKEN or GITLAB_TOKEN (GITHUB_API_URL, GITLAB_API_URL for
your own servers). A failed attempt is tried again after twice the wait, up to
--propose-attempts times; then a NotProposed Warning Event says why. Helm
sources need the helm binary, which the image does not have: they are left to
kubectl gitops propose.`,
		Example: `  kubectl gitops controller --all-namespaces --lease-namespace argocd --address :8080

  # Mirror the audit log to write-once storage, with signed checkpoints
  kubectl gitops controller --mirror s3://audit-bucket/prod --mirror-retention 8760h \
    --checkpoint-key /etc/kubectl-gitops/checkpoint/key.pem`,
		Args: positional(0),
		RunE: run(o),
	}
	o.addAppNamespace(cmd)
	o.addEngineFlags(cmd)
	addAllNamespaces(cmd, &o.AllNamespaces, "Applications")
	cmd.Flags().DurationVar(&o.ProposeAfter, "propose-after", 2*time.Minute, "how long after a session marked --propose opened the controller proposes its fix, if nobody has")
	cmd.Flags().IntVar(&o.ProposeAttempts, "propose-attempts", 5, "how many times a failed proposal is tried, each wait twice the one before (0: the controller proposes nothing)")
	cmd.Flags().StringVar(&o.proposeTo, "propose-provider", "", "where the controller's proposals are opened: github, gitlab or none (push the branch only); default: from each repository URL")
	cmd.Flags().StringToStringVar(&o.proposeProjects, "propose-project", nil, "REPO_URL=PROJECT: the project on the provider of a repository whose URL does not name it (repeatable)")
	cmd.Flags().StringArrayVar(&o.gitHosts, "propose-git-host", nil, "a host GIT_TOKEN may be sent to, besides github.com, gitlab.com and the hosts of GITHUB_API_URL and GITLAB_API_URL (repeatable): a repository elsewhere is left to kubectl gitops propose")
	cmd.Flags().StringVar(&o.LeaseNamespace, "lease-namespace", "argocd", "namespace of the Lease the replicas elect a leader with")
	cmd.Flags().StringVar(&o.LeaseName, "lease-name", "kubectl-gitops-controller", "name of that Lease")
	cmd.Flags().DurationVar(&o.LeaseDuration, "lease-duration", 15*time.Second, "how long a leader's lease holds: another replica takes over within it")
	cmd.Flags().StringVar(&o.Identity, "identity", "", "this replica's name in the Lease (default: the host name, which is the pod's)")
	cmd.Flags().StringVar(&o.Address, "address", ":8080", "where to serve /metrics, /healthz and /readyz")
	cmd.Flags().DurationVar(&o.Resync, "resync", 5*time.Minute, "how often the Applications are listed again; a session is looked at again only when its Application changes or its expiry, reminder or refresh is due")
	cmd.Flags().DurationVar(&o.RemindEvery, "remind-every", time.Hour, "how often an expired session, or one whose sync was turned back on, is told again (Warning Event, ticket comment)")
	cmd.Flags().DurationVar(&o.RefreshEvery, "refresh-every", time.Minute, "how often, at most, to ask Argo CD to refresh an auto-restore session's Application that has not caught up (a Git webhook makes it sooner)")
	o.mirror.add(cmd, "copy every audit record to this S3-compatible bucket and prefix, s3://BUCKET/PREFIX, while leading")
	cmd.Flags().DurationVar(&o.MirrorRetention, "mirror-retention", 0, "lock each mirrored record in compliance mode this long (e.g. 8760h; default: the bucket's default retention)")
	cmd.Flags().BoolVar(&o.AcceptUnlocked, "mirror-accept-unlocked", false, "mirror to a bucket without versioning or Object Lock, whose objects can be deleted (kubectl_gitops_mirror_write_once 0 says so)")
	cmd.Flags().DurationVar(&o.MirrorEvery, "mirror-every", 2*time.Second, "how often the leader looks for records to mirror")
	cmd.Flags().StringVar(&o.CheckpointKey, "checkpoint-key", "", "PEM file of the ed25519 private key checkpoints are signed with (a mounted Secret; needs --mirror)")
	cmd.Flags().StringVar(&o.TSA, "tsa", "", "URL of an RFC 3161 timestamp authority that timestamps each checkpoint (its token is kept with the checkpoint; needs --checkpoint-key)")
	cmd.Flags().Uint64Var(&o.CheckpointRecords, "checkpoint-records", 100, "sign a checkpoint every this many records")
	cmd.Flags().DurationVar(&o.CheckpointInterval, "checkpoint-interval", 10*time.Minute, "sign a checkpoint at least this often while records come")
	cmd.Flags().DurationVar(&o.PruneAfter, "prune-after", 0, "delete audit records older than this from the cluster (e.g. 2160h) once the mirror holds them under lock, after a checkpoint signed at the cut; never an open session's (needs --mirror on a locked bucket and --checkpoint-key; default: keep every record)")
	return cmd
}

// Complete takes the identity from the host name when none is given.
func (o *ControllerOptions) Complete(*cobra.Command, []string) error {
	if o.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return usageErrorf("--identity is required: the host name is unknown (%v)", err)
		}
		o.Identity = host
	}
	return nil
}

// Validate checks the flags.
func (o *ControllerOptions) Validate() error {
	switch {
	case o.LeaseDuration < time.Second:
		return usageErrorf("--lease-duration %s: use a second or more", o.LeaseDuration)
	case o.Resync <= 0 || o.RefreshEvery <= 0 || o.RemindEvery <= 0:
		return usageErrorf("--resync, --refresh-every and --remind-every must be positive durations")
	case o.LeaseNamespace == "" || o.LeaseName == "":
		return usageErrorf("--lease-namespace and --lease-name must not be empty")
	case o.mirror.URL == "" && (o.CheckpointKey != "" || o.MirrorRetention != 0 || o.AcceptUnlocked):
		return usageErrorf("--checkpoint-key, --mirror-retention and --mirror-accept-unlocked need --mirror s3://BUCKET/PREFIX")
	case o.MirrorEvery <= 0 || o.CheckpointInterval <= 0 || o.CheckpointRecords == 0 || o.MirrorRetention < 0 || o.PruneAfter < 0:
		return usageErrorf("--mirror-every, --checkpoint-interval, --checkpoint-records must be positive, --mirror-retention and --prune-after not negative")
	case o.TSA != "" && o.CheckpointKey == "":
		return usageErrorf("--tsa timestamps checkpoints: it needs --checkpoint-key")
	case o.TSA != "" && !isHTTPURL(o.TSA):
		return usageErrorf("--tsa %q: give the timestamp authority's http(s) URL", o.TSA)
	case o.PruneAfter > 0 && (o.CheckpointKey == "" || o.AcceptUnlocked):
		return usageErrorf("--prune-after needs --mirror on a bucket with Object Lock (not --mirror-accept-unlocked) and --checkpoint-key: records leave the cluster only under lock and a signed checkpoint")
	case o.ProposeAfter <= 0 || o.ProposeAttempts < 0:
		return usageErrorf("--propose-after must be positive and --propose-attempts not negative")
	case o.PruneAfter > 0 && o.MirrorRetention > 0 && o.MirrorRetention <= o.PruneAfter:
		return usageErrorf("--mirror-retention %s must be longer than --prune-after %s: a record leaves the cluster only while its lock in the mirror runs", o.MirrorRetention, o.PruneAfter)
	}
	return nil
}

// tokenHosts are the hosts the controller sends GIT_TOKEN to: github.com
// and gitlab.com unless the provider's API is another server's (a GitHub
// Enterprise or self-managed GitLab token is not for them), that server's
// host, and those named with --propose-git-host.
func (o *ControllerOptions) tokenHosts() []string {
	var hosts []string
	for env, public := range map[string]string{githubAPIEnv: "github.com", gitlabAPIEnv: "gitlab.com"} {
		u, err := url.Parse(os.Getenv(env))
		if err != nil || u.Hostname() == "" || strings.TrimPrefix(strings.ToLower(u.Hostname()), "api.") == public {
			hosts = append(hosts, public)
			continue
		}
		hosts = append(hosts, strings.ToLower(u.Hostname()))
	}
	for _, h := range o.gitHosts {
		hosts = append(hosts, strings.ToLower(h))
	}
	slices.Sort(hosts)
	return hosts
}

// mirroring opens the mirror and checks its bucket, or says why not.
func (o *ControllerOptions) mirroring(ctx context.Context, c *controller.Controller, engine *breakglass.Engine) error {
	if o.mirror.URL == "" {
		return nil
	}
	m, err := o.mirror.open(ctx, o.MirrorRetention)
	if err != nil {
		return err
	}
	p, err := m.Protection(ctx)
	if err != nil {
		return fmt.Errorf("--mirror %s: %w", o.mirror.URL, err)
	}
	switch {
	case !p.WriteOnce() && !o.AcceptUnlocked:
		return usageErrorf("--mirror %s: the bucket has no versioning and Object Lock (versioned %t, Object Lock %t), so records there can be deleted: create it with Object Lock (docs/audit.md, The mirror) or pass --mirror-accept-unlocked", o.mirror.URL, p.Versioned, p.ObjectLock)
	case o.MirrorRetention > 0 && !p.ObjectLock:
		c.Log("mirror: --mirror-retention %s is not applied: bucket %s has no Object Lock", o.MirrorRetention, m.Location().Bucket)
	case o.PruneAfter > 0 && o.MirrorRetention == 0 && p.DefaultRetention == "":
		return usageErrorf("--prune-after: bucket %s has no default retention, so records would be mirrored unlocked and never pruned: pass --mirror-retention longer than --prune-after", m.Location().Bucket)
	}
	c.Metrics.SetMirror(p.WriteOnce())
	log, ok := engine.Audit.(*audit.ConfigMapStore)
	if !ok {
		return fmt.Errorf("--mirror copies the cluster's audit log, and the engine has none")
	}
	c.Mirroring = &controller.Mirroring{Log: log, Mirror: m, Every: o.MirrorEvery,
		CheckpointRecords: o.CheckpointRecords, CheckpointInterval: o.CheckpointInterval, PruneAfter: o.PruneAfter, WriteOnce: p.WriteOnce()}
	if o.CheckpointKey != "" {
		data, err := os.ReadFile(o.CheckpointKey)
		if err != nil {
			return usageErrorf("--checkpoint-key: %v", err)
		}
		if c.Mirroring.Signer, err = audit.NewSigner(data); err != nil {
			return usageErrorf("--checkpoint-key %s: %v", o.CheckpointKey, err)
		}
	}
	if o.TSA != "" {
		c.Mirroring.TSA = &audit.TSA{URL: o.TSA}
	}
	lock := "write-once: versioning and Object Lock"
	if !p.WriteOnce() {
		lock = "NOT write-once (--mirror-accept-unlocked)"
	}
	if p.DefaultRetention != "" {
		lock += ", default retention " + p.DefaultRetention
	}
	signed := "no checkpoints"
	if c.Mirroring.Signer != nil {
		signed = "checkpoints signed by key " + c.Mirroring.Signer.KeyID()
	}
	if o.PruneAfter > 0 {
		signed += fmt.Sprintf("; records older than %s pruned from the cluster once held there under lock", o.PruneAfter)
	}
	c.Log("mirroring the audit log to %s (%s; %s)", m.Location(), lock, signed)
	return nil
}

// Run serves the health and metrics endpoints and runs the controller
// until ctx ends or the lease is lost.
func (o *ControllerOptions) Run(ctx context.Context) error {
	engine, err := o.engine()
	if err != nil {
		return err
	}
	if o.AllNamespaces {
		engine.AppNamespace = ""
	}
	// Its Events are the controller's, which only its ServiceAccount may
	// report as (deploy/policy).
	engine.EventComponent = breakglass.ControllerEventComponent
	argo, err := o.argoServer()
	if err != nil {
		return err
	}
	c := &controller.Controller{
		Engine: engine, Argo: argo, LeaseNamespace: o.LeaseNamespace, LeaseName: o.LeaseName, LeaseDuration: o.LeaseDuration,
		Identity: o.Identity, Resync: o.Resync, RefreshEvery: o.RefreshEvery, RemindEvery: o.RemindEvery, Metrics: controller.NewMetrics(),
		Log: func(format string, args ...any) {
			fmt.Fprintf(o.ErrOut, "%s %s\n", time.Now().UTC().Format(time.RFC3339), printable(fmt.Sprintf(format, args...)))
		},
	}
	if err := o.mirroring(ctx, c, engine); err != nil {
		return err
	}
	if err := (&proposeFlags{Provider: o.proposeTo, projectFlag: "propose-project"}).validate(); err != nil {
		return err
	}
	if o.ProposeAttempts > 0 {
		c.Proposer = &controller.Proposer{After: o.ProposeAfter, Attempts: o.ProposeAttempts,
			Auth: proposal.Auth{Username: os.Getenv(gitUsernameEnv), Token: os.Getenv(gitTokenEnv), Hosts: o.tokenHosts()},
			ProviderFor: func(repoURL string) (proposal.Provider, error) {
				f := proposeFlags{Provider: o.proposeTo, Project: o.proposeProjects[repoURL], projectFlag: "propose-project"}
				return f.provider(repoURL)
			}}
	}
	listener, err := net.Listen("tcp", o.Address)
	if err != nil {
		return usageErrorf("--address %s: %v", o.Address, err)
	}
	defer c.Serve(listener)()
	if err := c.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// isHTTPURL is whether s is an absolute http or https URL with a host.
func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
