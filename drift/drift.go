// Package drift reports the rest of the drift problem: which live fields
// differ from Git and who wrote them (managedFields), ignoreDifferences
// entries as owned debt, and each namespace's live-state contract. It
// reads through package argocd and writes nothing but debt notes; it knows
// of break-glass sessions only what the caller tells it (Patched), so that
// it never imports the session engine. It never prints and never reads flags.
package drift

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// A Class says who drifted a field, and so what the response is.
type Class string

// The classes of drift, as GitOps triage tells them apart.
const (
	// BreakGlass is a patch of a break-glass session of this tool.
	BreakGlass Class = "break-glass"
	// Manual is a person's kubectl.
	Manual Class = "manual"
	// Pipeline is a deploy tool or CI job patching live manifests.
	Pipeline Class = "pipeline"
	// Controller is a controller or operator that owns the field.
	Controller Class = "controller"
	// Defaulted is a field no manager owns: set by the API server's
	// defaulting or an admission webhook.
	Defaulted Class = "defaulted"
	// ArgoCD is Argo CD itself (a sync that has not finished).
	ArgoCD Class = "argocd"
	// Unknown is a field whose writer cannot be named: the live
	// object could not be read, or its managedFields do not say.
	Unknown Class = "unknown"
	// Deleted is a resource Git has and the cluster does not.
	Deleted Class = "deleted"
)

// ManagerClass maps field managers whose name starts with Prefix to a class.
type ManagerClass struct {
	Prefix string
	Class  Class
}

// DefaultManagerClasses is the manager-to-class table; the first matching
// prefix wins, and --manager-class entries go before it. Managers that match
// nothing are controllers: writes with operation Update by a program.
var DefaultManagerClasses = []ManagerClass{
	{"kubectl-gitops", BreakGlass},
	{"argocd-controller", ArgoCD},
	{"argocd-application-controller", ArgoCD},
	{"kubectl", Manual}, // kubectl-edit, -patch, -set, -scale, -client-side-apply, -label, -annotate
	{"k9s", Manual},
	{"Mozilla", Manual}, // the dashboard's browser requests
	{"helm", Pipeline},
	{"argo-rollouts", Pipeline},
	{"jenkins", Pipeline},
	{"tekton", Pipeline},
	{"github-actions", Pipeline},
	{"gitlab", Pipeline},
	{"spinnaker", Pipeline},
	{"skaffold", Pipeline},
	{"before-first-apply", Defaulted},
}

// ClassOf classes a field manager by the table.
func ClassOf(table []ManagerClass, manager string) Class {
	for _, mc := range table {
		if strings.HasPrefix(strings.ToLower(manager), strings.ToLower(mc.Prefix)) {
			return mc.Class
		}
	}
	return Controller
}

// Field is one field whose live value differs from Git's target
// state, with who last wrote it and what to do about it.
type Field struct {
	App      audit.AppRef `json:"application"`
	Owner    string       `json:"owner,omitempty"`
	SelfHeal bool         `json:"selfHeal"`
	Resource audit.Target `json:"resource"`
	// Path is the field (JSON pointer, list items by name); "" when only
	// the resource is known to drift (no Argo CD API).
	Path    string     `json:"path,omitempty"`
	Live    any        `json:"live,omitempty"`
	Git     any        `json:"git,omitempty"`
	Manager string     `json:"manager,omitempty"`
	Since   *time.Time `json:"since,omitempty"`
	Class   Class      `json:"class"`
	// Session is the break-glass session that patched it.
	Session string `json:"session,omitempty"`
	// Contract says how the write breaks the namespace's live-state
	// contract; "" when it does not.
	Contract string `json:"contract,omitempty"`
	Response string `json:"response"`
}

// Report is what drift found in one Application.
type Report struct {
	App audit.AppRef `json:"application"`
	// Mode is "field" (Argo CD's API compared each field, after its own
	// normalisation and ignoreDifferences) or "resource" (OutOfSync
	// resources from status.resources, attributed from the live objects).
	Mode   string   `json:"mode"`
	Fields []Field  `json:"fields"`
	Notes  []string `json:"notes,omitempty"`
	// Incomplete is set when part of the Application could not be
	// compared: "no drift" would not be the whole truth.
	Incomplete bool `json:"incomplete,omitempty"`
}

// Options are what drift reads beyond the Applications.
type Options struct {
	// Argo is the Argo CD API; nil reports resource-level drift only.
	Argo *argocd.Server
	// Managers is the manager-to-class table.
	Managers []ManagerClass
	// OwnerKey is the Application label naming whom to page.
	OwnerKey string
	// Patched reads what an Application's open break-glass session
	// patched (breakglass.PatchedBy); nil: no Application has one.
	Patched func(app argocd.App) Patched
}

// Patched is what an Application's open break-glass session patched: a
// field is break-glass drift only when that session patched it, since a
// field manager may call itself anything.
type Patched struct {
	// Session is the open session's id; "" when there is none.
	Session string
	// Restore is the command that ends it.
	Restore string
	// Fields are the paths patched, per target.
	Fields []PatchedFields
	// Held is whether the session holds these paths out of Argo CD's
	// compare (ignoreDifferences): Argo CD's API no longer reports them.
	Held bool
}

// PatchedFields are the paths a session patched in one target.
type PatchedFields struct {
	Target audit.Target
	Paths  []string
}

// OwnerLabel is where an Application names its owner by default: a label,
// which the break-glass group may not change (deploy/policy).
const OwnerLabel = audit.KeyPrefix + "owner"

// Find reports the drift of each Application.
func Find(ctx context.Context, c *argocd.Client, apps []argocd.App, opts Options) ([]*Report, error) {
	// Many Applications share a destination and its namespaces: each
	// cluster is resolved, and each namespace's contract read, once a run.
	r := &run{client: *c}
	if c.Clusters != nil {
		r.client.Clusters = &onceClusters{Clusters: c.Clusters}
	}
	out := make([]*Report, len(apps))
	errs := make([]error, len(apps))
	argocd.Parallel(len(apps), func(i int) { out[i], errs[i] = find(ctx, r, apps[i], opts) })
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// run is what the Applications of one Find share.
type run struct {
	client    argocd.Client
	contracts once[Contract]
	// objects are the live resources read, each once: Applications that
	// share a resource (Argo CD's SharedResourceWarning) see it as one
	// read saw it.
	objects once[*unstructured.Unstructured]
}

// once does each key's lookup once, however many workers ask for it.
type once[V any] struct {
	mu     sync.Mutex
	lookup map[string]func() (V, error)
}

func (o *once[V]) do(key string, lookup func() (V, error)) (V, error) {
	o.mu.Lock()
	f, ok := o.lookup[key]
	if !ok {
		if o.lookup == nil {
			o.lookup = map[string]func() (V, error){}
		}
		f = sync.OnceValues(lookup)
		o.lookup[key] = f
	}
	o.mu.Unlock()
	return f()
}

// onceClusters resolves each destination cluster once: its clients, and
// the discovery cache behind its mapper, serve every Application there.
type onceClusters struct {
	argocd.Clusters
	found once[*argocd.Cluster]
}

func (o *onceClusters) Destination(server, name, kubeContext string) (*argocd.Cluster, error) {
	return o.found.do(server+"\x00"+name+"\x00"+kubeContext, func() (*argocd.Cluster, error) {
		return o.Clusters.Destination(server, name, kubeContext)
	})
}

func find(ctx context.Context, r *run, app argocd.App, opts Options) (*Report, error) {
	ref := app.Record()
	rep := &Report{App: ref, Mode: "resource", Fields: []Field{}}
	base := Field{App: ref, Owner: ownerOf(app, opts.OwnerKey)}
	base.SelfHeal = app.SelfHealing()
	var session Patched
	if opts.Patched != nil {
		session = opts.Patched(app)
	}

	note := func(format string, args ...any) {
		rep.Notes = append(rep.Notes, redact.Text(fmt.Sprintf(format, args...)))
	}
	var diffs []argocd.ResourceDiff
	if opts.Argo != nil {
		var err error
		if diffs, err = opts.Argo.ManagedResources(ctx, ref); err != nil {
			note("field-level comparison unavailable (%s): resource level only", argocd.Brief(err))
		} else {
			rep.Mode = "field"
		}
	}
	if rep.Mode == "resource" {
		diffs = outOfSyncResources(app)
	}
	// The destination cluster, once for all the Application's resources.
	cluster, clusterErr := r.client.ClusterOf(app, "")
	dest := app.Destination()
	contracts := map[string]Contract{}
	contractOf := func(namespace string) Contract {
		if c, ok := contracts[namespace]; ok {
			return c
		}
		c := Contract{Namespace: namespace}
		if clusterErr == nil && namespace != "" {
			var err error
			key := dest.Server + "\x00" + dest.Name + "\x00" + namespace
			if c, err = r.contracts.do(key, func() (Contract, error) { return ContractOf(ctx, cluster.Kube, namespace) }); err != nil {
				note("the live-state contract of namespace %s could not be read (%s)", namespace, argocd.Brief(err))
			}
		}
		contracts[namespace] = c
		return c
	}
	finish := func(row Field) Field {
		row.Session = session.sessionFor(row.Resource, row.Class)
		row.Contract = contractOf(row.Resource.Namespace).violatedBy(row.Class)
		row.Response = response(row, app, session.Restore)
		if row.Contract != "" {
			row.Response = "against the contract: " + row.Contract + ". " + row.Response
		}
		return row
	}
	for _, d := range diffs {
		target := audit.Target{Group: d.Group, Kind: d.Kind, Namespace: d.Namespace, Name: d.Name}
		live, err := (*unstructured.Unstructured)(nil), clusterErr
		if clusterErr == nil {
			key := dest.Server + "\x00" + dest.Name + "\x00" + target.Group + "/" + target.Kind + "/" + target.Namespace + "/" + target.Name
			live, err = r.objects.do(key, func() (*unstructured.Unstructured, error) { return cluster.Object(ctx, target) })
		}
		if err != nil && !(d.Deleted() && apierrors.IsNotFound(err)) {
			note("%s %s/%s: %s", d.Kind, d.Namespace, d.Name, argocd.Brief(err))
			rep.Incomplete = true
		}
		if live != nil {
			target.Version = live.GroupVersionKind().Version
		}
		row := base
		row.Resource = target
		if rep.Mode == "resource" {
			row.Manager, row.Since = lastWriter(live)
			row.Class = ClassOf(opts.Managers, row.Manager)
			if live == nil || row.Manager == "" {
				row.Class = Unknown
			}
			row = finish(row)
			row.Response += " (configure the Argo CD API to see which fields drifted)"
			rep.Fields = append(rep.Fields, row)
			continue
		}
		if d.Deleted() {
			row.Class, row.Path = Deleted, ""
			rep.Fields = append(rep.Fields, finish(row))
			continue
		}
		var before, after map[string]any
		if json.Unmarshal([]byte(d.PredictedLiveState), &before) != nil || json.Unmarshal([]byte(d.NormalizedLiveState), &after) != nil {
			note("%s %s/%s: Argo CD's states of it are not JSON: not compared", d.Kind, d.Namespace, d.Name)
			rep.Incomplete = true
			continue
		}
		for _, c := range audit.Diff(before, after) {
			row := row
			row.Path = c.Path
			row.Git, row.Live = redact.At(target.GroupKind(), c.Path, c.Before), redact.At(target.GroupKind(), c.Path, c.After)
			if redact.AfterSecretFlag(c.Path, []map[string]any{before, after}) {
				row.Git, row.Live = redact.All(c.Before), redact.All(c.After)
			}
			row.Manager, row.Since = FieldWriter(live, c.Path)
			switch {
			case live == nil:
				row.Class = Unknown
			case len(live.GetManagedFields()) == 0:
				row.Class = Unknown
				note("%s %s/%s has no managedFields (they were reset): nobody can be named", target.Kind, target.Namespace, target.Name)
			case row.Manager == "" && throughKeyedItem(c.Path):
				// A list item keyed by something other than its name
				// (volumeMounts, ports): its writer cannot be told apart.
				row.Class = Unknown
			case row.Manager == "":
				row.Class = Defaulted
			default:
				row.Class = ClassOf(opts.Managers, row.Manager)
			}
			if row.Class == BreakGlass && !session.patched(target, c.Path) {
				// A manager may call itself anything: only a path the open
				// session patched is a break-glass.
				row.Class = Manual
				note("%s %s/%s: %s is written by manager %q, which no open break-glass session patched: shown as manual", target.Kind, target.Namespace, target.Name, c.Path, row.Manager)
			}
			rep.Fields = append(rep.Fields, finish(row))
		}
	}
	if rep.Mode == "field" && session.Held {
		// Argo CD compares the held paths no more: they are the
		// session's, read from the live objects.
		for _, pf := range session.Fields {
			var live *unstructured.Unstructured
			if clusterErr == nil {
				key := dest.Server + "\x00" + dest.Name + "\x00" + pf.Target.Group + "/" + pf.Target.Kind + "/" + pf.Target.Namespace + "/" + pf.Target.Name
				live, _ = r.objects.do(key, func() (*unstructured.Unstructured, error) { return cluster.Object(ctx, pf.Target) })
			}
			for _, path := range pf.Paths {
				if reported(rep.Fields, pf.Target, path) {
					continue
				}
				row := base
				row.Resource, row.Path, row.Class = pf.Target, path, Unknown
				if live != nil {
					value, _ := audit.Lookup(live.Object, path)
					row.Live = redact.At(pf.Target.GroupKind(), path, value)
					row.Manager, row.Since = FieldWriter(live, path)
					row.Class = ClassOf(opts.Managers, row.Manager)
				}
				rep.Fields = append(rep.Fields, finish(row))
			}
		}
		note("session %s holds its patched fields out of Argo CD's compare (ignoreDifferences): they are shown from the live objects, without Git's value (%s compares them with Git)", session.Session, next.Status("", ""))
	}
	return rep, nil
}

// reported is whether fields already hold path of t.
func reported(fields []Field, t audit.Target, path string) bool {
	for _, f := range fields {
		if f.Resource.SameObject(t) && f.Path == path {
			return true
		}
	}
	return false
}

// outOfSyncResources are the resources status.resources reports OutOfSync.
func outOfSyncResources(app argocd.App) []argocd.ResourceDiff {
	var out []argocd.ResourceDiff
	for _, r := range app.StatusResources() {
		if r.Status == "OutOfSync" {
			out = append(out, argocd.ResourceDiff{Group: r.Target.Group, Kind: r.Target.Kind, Namespace: r.Target.Namespace, Name: r.Target.Name})
		}
	}
	return out
}

// patched is whether the open session patched path of t.
func (s Patched) patched(t audit.Target, path string) bool {
	for _, p := range s.Fields {
		if p.Target.SameObject(t) && slices.Contains(p.Paths, path) {
			return true
		}
	}
	return false
}

// sessionFor is the open session that patched t, for a break-glass row.
func (s Patched) sessionFor(t audit.Target, class Class) string {
	if class != BreakGlass {
		return ""
	}
	for _, p := range s.Fields {
		if p.Target.SameObject(t) {
			return s.Session
		}
	}
	return ""
}

// ownerOf is whom to page for app: the key as a label (the break-glass
// group cannot change labels: deploy/policy), else the project's name.
func ownerOf(app argocd.App, key string) string {
	if key == "" {
		key = OwnerLabel
	}
	if v := app.GetLabels()[key]; v != "" {
		return v
	}
	project := app.Project()
	return "project " + project
}

// response is what to do about a drifted field, by its class; restore
// ends the open session.
func response(f Field, app argocd.App, restore string) string {
	heal := "Argo CD does not self-heal this Application: the drift stays until someone acts. "
	if f.SelfHeal {
		heal = ""
	}
	src := app.Source()
	where := "the manifests"
	if src.Path != "" {
		where = src.Path
	}
	switch f.Class {
	case BreakGlass:
		if f.Session != "" {
			return heal + "break-glass session " + f.Session + ": bring Git up to the fix (its ticket says how), then `" + restore + "`"
		}
		return heal + "a break-glass patch whose session is closed: move the value into Git or let Argo CD sync it back"
	case Manual, Pipeline:
		if f.Path == "" {
			return heal + "move the change into Git in " + where + ", or sync to drop it"
		}
		return heal + "move it into Git: " + gitChange(argocd.AdviseChange(src, f.Path, f.Git, f.Live), where) + ", or sync to drop it"
	case Controller:
		return heal + fmt.Sprintf("%s owns this field: remove %s from the manifests in %s, or ignore it: ignoreDifferences: [{group: %q, kind: %q, managedFieldsManagers: [%q]}]",
			f.Manager, argocd.OrUnknown(f.Path), where, f.Resource.Group, f.Resource.Kind, f.Manager)
	case ArgoCD:
		return heal + "Argo CD wrote it last: a sync is in progress or failed; look at the Application's sync status"
	case Unknown:
		return heal + "its writer cannot be named (see the notes): find who changed it before moving it into Git or syncing it away"
	case Deleted:
		return heal + "the resource is in Git but not in the cluster: sync to recreate it, or remove it from Git"
	default:
		return heal + fmt.Sprintf("set by defaulting or an admission webhook: ignore it: ignoreDifferences: [{group: %q, kind: %q, jsonPointers: [%q]}]", f.Resource.Group, f.Resource.Kind, argocd.OrUnknown(f.Path))
	}
}

// gitChange says c in a line of text; where is the source path.
func gitChange(c argocd.GitChange, where string) string {
	switch c.Kind {
	case argocd.ChangeSecret:
		return "a value not recorded (it may be a secret): set it in Git as it is live, a secret from your secret store, in " + where
	case argocd.ChangeKustomizeImage:
		return fmt.Sprintf("`kustomize edit set image %s=%s` in %s", c.ImageName, c.Image, where)
	case argocd.ChangeHelmImage:
		values := "the chart's values"
		if c.ValueFile != "" {
			values = c.ValueFile + " (the last value file wins)"
		}
		return fmt.Sprintf("the chart renders container %s's image: set its values (such as image.repository and image.tag) in %s so it renders %s", c.Container, values, c.Image)
	case argocd.ChangeManifestImage:
		return fmt.Sprintf("set container %s's image to %s in %s", c.Container, c.Image, where)
	}
	b, _ := json.Marshal(c.Value)
	return fmt.Sprintf("set %s to %s in %s", c.Path, b, where)
}
