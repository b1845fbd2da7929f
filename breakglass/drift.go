package breakglass

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// A DriftClass says who drifted a field, and so what the response is.
type DriftClass string

// The classes of drift, as GitOps triage tells them apart.
const (
	// DriftBreakGlass is a patch of a break-glass session of this tool.
	DriftBreakGlass DriftClass = "break-glass"
	// DriftManual is a person's kubectl.
	DriftManual DriftClass = "manual"
	// DriftPipeline is a deploy tool or CI job patching live manifests.
	DriftPipeline DriftClass = "pipeline"
	// DriftController is a controller or operator that owns the field.
	DriftController DriftClass = "controller"
	// DriftDefaulted is a field no manager owns: set by the API server's
	// defaulting or an admission webhook.
	DriftDefaulted DriftClass = "defaulted"
	// DriftArgoCD is Argo CD itself (a sync that has not finished).
	DriftArgoCD DriftClass = "argocd"
	// DriftUnknown is a field whose writer cannot be named: the live
	// object could not be read, or its managedFields do not say.
	DriftUnknown DriftClass = "unknown"
	// DriftDeleted is a resource Git has and the cluster does not.
	DriftDeleted DriftClass = "deleted"
)

// ManagerClass maps field managers whose name starts with Prefix to a class.
type ManagerClass struct {
	Prefix string
	Class  DriftClass
}

// DefaultManagerClasses is the manager-to-class table; the first matching
// prefix wins, and --manager-class entries go before it. Managers that match
// nothing are controllers: writes with operation Update by a program.
var DefaultManagerClasses = []ManagerClass{
	{"kubectl-gitops", DriftBreakGlass},
	{"argocd-controller", DriftArgoCD},
	{"argocd-application-controller", DriftArgoCD},
	{"kubectl", DriftManual}, // kubectl-edit, -patch, -set, -scale, -client-side-apply, -label, -annotate
	{"k9s", DriftManual},
	{"Mozilla", DriftManual}, // the dashboard's browser requests
	{"helm", DriftPipeline},
	{"argo-rollouts", DriftPipeline},
	{"jenkins", DriftPipeline},
	{"tekton", DriftPipeline},
	{"github-actions", DriftPipeline},
	{"gitlab", DriftPipeline},
	{"spinnaker", DriftPipeline},
	{"skaffold", DriftPipeline},
	{"before-first-apply", DriftDefaulted},
}

// ClassOf classes a field manager by the table.
func ClassOf(table []ManagerClass, manager string) DriftClass {
	for _, mc := range table {
		if strings.HasPrefix(strings.ToLower(manager), strings.ToLower(mc.Prefix)) {
			return mc.Class
		}
	}
	return DriftController
}

// DriftedField is one field whose live value differs from Git's target
// state, with who last wrote it and what to do about it.
type DriftedField struct {
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
	Class   DriftClass `json:"class"`
	// Session is the break-glass session that patched it.
	Session string `json:"session,omitempty"`
	// Contract says how the write breaks the namespace's live-state
	// contract; "" when it does not.
	Contract string `json:"contract,omitempty"`
	Response string `json:"response"`
}

// DriftReport is what drift found in one Application.
type DriftReport struct {
	App audit.AppRef `json:"application"`
	// Mode is "field" (Argo CD's API compared each field, after its own
	// normalisation and ignoreDifferences) or "resource" (OutOfSync
	// resources from status.resources, attributed from the live objects).
	Mode   string         `json:"mode"`
	Fields []DriftedField `json:"fields"`
	Notes  []string       `json:"notes,omitempty"`
	// Incomplete is set when part of the Application could not be
	// compared: "no drift" would not be the whole truth.
	Incomplete bool `json:"incomplete,omitempty"`
}

// DriftOptions are what drift reads beyond the Applications.
type DriftOptions struct {
	// Argo is the Argo CD API; nil reports resource-level drift only.
	Argo *ArgoServer
	// Managers is the manager-to-class table.
	Managers []ManagerClass
	// OwnerKey is the Application label naming whom to page.
	OwnerKey string
}

// OwnerLabel is where an Application names its owner by default: a label,
// which the break-glass group may not change (deploy/policy).
const OwnerLabel = audit.KeyPrefix + "owner"

// Drift reports the drift of each Application.
func (e *Engine) Drift(ctx context.Context, apps []*unstructured.Unstructured, opts DriftOptions) ([]*DriftReport, error) {
	out := make([]*DriftReport, len(apps))
	errs := make([]error, len(apps))
	parallel(len(apps), func(i int) { out[i], errs[i] = e.drift(ctx, apps[i], opts) })
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (e *Engine) drift(ctx context.Context, app *unstructured.Unstructured, opts DriftOptions) (*DriftReport, error) {
	ref := audit.AppRef{Namespace: app.GetNamespace(), Name: app.GetName()}
	ref.Project, _, _ = unstructured.NestedString(app.Object, "spec", "project")
	rep := &DriftReport{App: ref, Mode: "resource", Fields: []DriftedField{}}
	base := DriftedField{App: ref, Owner: ownerOf(app, opts.OwnerKey)}
	selfHeal, _, _ := unstructured.NestedBool(app.Object, "spec", "syncPolicy", "automated", "selfHeal")
	base.SelfHeal = selfHeal && syncsAutomatically(app)
	session, _ := ParseSession(app.GetAnnotations()[SessionAnnotation])

	note := func(format string, args ...any) {
		rep.Notes = append(rep.Notes, redact.Text(fmt.Sprintf(format, args...)))
	}
	var diffs []resourceDiff
	if opts.Argo != nil {
		var err error
		if diffs, err = opts.Argo.managedResources(ctx, ref); err != nil {
			note("field-level comparison unavailable (%s): resource level only", shortErr(err))
		} else {
			rep.Mode = "field"
		}
	}
	if rep.Mode == "resource" {
		diffs = outOfSyncResources(app)
	}
	// The destination cluster, once for all the Application's resources.
	dest, _, _ := unstructured.NestedStringMap(app.Object, "spec", "destination")
	cluster, clusterErr := e.targetCluster(app.GetName(), dest, "")
	contracts := map[string]Contract{}
	contractOf := func(namespace string) Contract {
		if c, ok := contracts[namespace]; ok {
			return c
		}
		c := Contract{Namespace: namespace}
		if clusterErr == nil && namespace != "" {
			var err error
			if c, err = ContractOf(ctx, cluster.Kube, namespace); err != nil {
				note("the live-state contract of namespace %s could not be read (%s)", namespace, shortErr(err))
			}
		}
		contracts[namespace] = c
		return c
	}
	finish := func(row DriftedField) DriftedField {
		row.Session = sessionFor(session, row.Resource, row.Class)
		row.Contract = contractOf(row.Resource.Namespace).violatedBy(row.Class)
		row.Response = response(row, app)
		if row.Contract != "" {
			row.Response = "against the contract: " + row.Contract + ". " + row.Response
		}
		return row
	}
	for _, d := range diffs {
		target := audit.Target{Group: d.Group, Kind: d.Kind, Namespace: d.Namespace, Name: d.Name}
		live, err := (*unstructured.Unstructured)(nil), clusterErr
		if clusterErr == nil {
			live, err = cluster.object(ctx, target)
		}
		if err != nil && !(d.deleted() && apierrors.IsNotFound(err)) {
			note("%s %s/%s: %s", d.Kind, d.Namespace, d.Name, shortErr(err))
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
				row.Class = DriftUnknown
			}
			row = finish(row)
			row.Response += " (configure the Argo CD API to see which fields drifted)"
			rep.Fields = append(rep.Fields, row)
			continue
		}
		if d.deleted() {
			row.Class, row.Path = DriftDeleted, ""
			rep.Fields = append(rep.Fields, finish(row))
			continue
		}
		var before, after map[string]any
		if json.Unmarshal([]byte(d.PredictedLiveState), &before) != nil || json.Unmarshal([]byte(d.NormalizedLiveState), &after) != nil {
			note("%s %s/%s: Argo CD's states of it are not JSON: not compared", d.Kind, d.Namespace, d.Name)
			rep.Incomplete = true
			continue
		}
		for _, c := range Diff(before, after) {
			row := row
			row.Path = c.Path
			row.Git, row.Live = redact.At(c.Path, c.Before), redact.At(c.Path, c.After)
			if target.IsSecret() || afterSecretFlag(c.Path, []map[string]any{before, after}) {
				row.Git, row.Live = redact.All(c.Before), redact.All(c.After)
			}
			row.Manager, row.Since = fieldWriter(live, c.Path)
			switch {
			case live == nil:
				row.Class = DriftUnknown
			case len(live.GetManagedFields()) == 0:
				row.Class = DriftUnknown
				note("%s %s/%s has no managedFields (they were reset): nobody can be named", target.Kind, target.Namespace, target.Name)
			case row.Manager == "" && throughKeyedItem(c.Path):
				// A list item keyed by something other than its name
				// (volumeMounts, ports): its writer cannot be told apart.
				row.Class = DriftUnknown
			case row.Manager == "":
				row.Class = DriftDefaulted
			default:
				row.Class = ClassOf(opts.Managers, row.Manager)
			}
			if row.Class == DriftBreakGlass && !sessionPatched(session, target, c.Path) {
				// A manager may call itself anything: only a path the open
				// session patched is a break-glass.
				row.Class = DriftManual
				note("%s %s/%s: %s is written by manager %q, which no open break-glass session patched: shown as manual", target.Kind, target.Namespace, target.Name, c.Path, row.Manager)
			}
			rep.Fields = append(rep.Fields, finish(row))
		}
	}
	return rep, nil
}

// resourceDiff is one entry of Argo CD's managed-resources answer.
type resourceDiff struct {
	Group, Kind, Namespace, Name string
	TargetState                  string `json:"targetState"`
	NormalizedLiveState          string `json:"normalizedLiveState"`
	PredictedLiveState           string `json:"predictedLiveState"`
	Modified                     bool   `json:"modified"`
	Hook                         bool   `json:"hook"`
}

// deleted is whether Git has the resource and the cluster does not.
func (d resourceDiff) deleted() bool {
	return d.NormalizedLiveState == "" || d.NormalizedLiveState == "null"
}

// managedResources asks the Argo CD API for the Application's resources
// that differ from Git, as its own diff sees them.
func (s ArgoServer) managedResources(ctx context.Context, app audit.AppRef) ([]resourceDiff, error) {
	var resp struct {
		Items []resourceDiff `json:"items"`
	}
	path := "/api/v1/applications/" + url.PathEscape(app.Name) + "/managed-resources?appNamespace=" + url.QueryEscape(app.Namespace)
	if err := s.get(ctx, path, &resp); err != nil {
		return nil, err
	}
	var out []resourceDiff
	for _, d := range resp.Items {
		if d.Modified && !d.Hook && d.TargetState != "" && d.TargetState != "null" {
			out = append(out, d)
		}
	}
	return out, nil
}

// outOfSyncResources are the resources status.resources reports OutOfSync.
func outOfSyncResources(app *unstructured.Unstructured) []resourceDiff {
	var out []resourceDiff
	for _, r := range statusResources(app) {
		if r.Status == "OutOfSync" {
			out = append(out, resourceDiff{Group: r.Target.Group, Kind: r.Target.Kind, Namespace: r.Target.Namespace, Name: r.Target.Name})
		}
	}
	return out
}

// object reads a managed resource from the cluster.
func (cluster *Cluster) object(ctx context.Context, t audit.Target) (*unstructured.Unstructured, error) {
	mapping, err := cluster.Mapper.RESTMapping(schema.GroupKind{Group: t.Group, Kind: t.Kind})
	if err != nil {
		return nil, err
	}
	return cluster.Dynamic.Resource(mapping.Resource).Namespace(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
}

// fieldWriter is the manager that owns path in live's managedFields, the
// latest when several do, with when it wrote; "" when none does.
func fieldWriter(live *unstructured.Unstructured, path string) (string, *time.Time) {
	if live == nil {
		return "", nil
	}
	segs := redact.Segments(path)
	var manager string
	var since *time.Time
	for _, mf := range live.GetManagedFields() {
		if mf.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(mf.FieldsV1.Raw, &fields) != nil || !owns(fields, segs) {
			continue
		}
		if at := mf.Time; manager == "" || at != nil && (since == nil || at.After(*since)) {
			manager = mf.Manager
			if at != nil {
				t := at.Time
				since = &t
			}
		}
	}
	return manager, since
}

// owns is whether a fieldsV1 set covers the field at segs: each segment a
// field (f:NAME) or a list item keyed by name (k:{"name":…}); a set that
// stops early owns the whole value below (an atomic field).
func owns(fields map[string]any, segs []string) bool {
	node := fields
	for _, seg := range segs {
		if next, ok := node["f:"+seg].(map[string]any); ok {
			node = next
			continue
		}
		next := itemKeyed(node, seg)
		if next == nil {
			return len(node) == 0
		}
		node = next
	}
	return true
}

// itemKeyed is the fieldsV1 child for the list item named name.
func itemKeyed(node map[string]any, name string) map[string]any {
	for k, v := range node {
		if !strings.HasPrefix(k, "k:") {
			continue
		}
		var key map[string]any
		if json.Unmarshal([]byte(k[2:]), &key) == nil && key["name"] == name {
			child, _ := v.(map[string]any)
			return child
		}
	}
	return nil
}

// lastWriter is the manager that wrote live last, other than Argo CD.
func lastWriter(live *unstructured.Unstructured) (string, *time.Time) {
	if live == nil {
		return "", nil
	}
	entries := live.GetManagedFields()
	sort.SliceStable(entries, func(i, j int) bool {
		return entries[i].Time != nil && (entries[j].Time == nil || entries[i].Time.After(entries[j].Time.Time))
	})
	for _, mf := range entries {
		if ClassOf(DefaultManagerClasses, mf.Manager) != DriftArgoCD {
			var since *time.Time
			if mf.Time != nil {
				t := mf.Time.Time
				since = &t
			}
			return mf.Manager, since
		}
	}
	return "", nil
}

// sessionPatched is whether the open session patched path of t.
func sessionPatched(s *Session, t audit.Target, path string) bool {
	if s == nil {
		return false
	}
	for _, p := range s.Patches {
		if !sameObject(p.Target, t) {
			continue
		}
		for _, f := range p.Fields {
			if f.Path == path {
				return true
			}
		}
	}
	return false
}

// throughKeyedItem is whether path goes through a list item that Diff
// names (a segment that is not a field of the item's list): Kubernetes
// may key such items by other fields (mountPath, port), which managedFields
// then use instead of the name.
func throughKeyedItem(path string) bool {
	for _, seg := range []string{"/volumeMounts/", "/volumeDevices/", "/ports/", "/hostAliases/", "/topologySpreadConstraints/"} {
		if strings.Contains(path, seg) {
			return true
		}
	}
	return false
}

// sessionFor is the open session that patched t, for a break-glass row.
func sessionFor(s *Session, t audit.Target, class DriftClass) string {
	if s == nil || class != DriftBreakGlass {
		return ""
	}
	for _, p := range s.Patches {
		if sameObject(p.Target, t) {
			return s.ID
		}
	}
	return ""
}

// sameObject is whether two targets name the same object (any version).
func sameObject(a, b audit.Target) bool {
	return a.Group == b.Group && a.Kind == b.Kind && a.Namespace == b.Namespace && a.Name == b.Name
}

// ownerOf is whom to page for app: the key as a label (the break-glass
// group cannot change labels: deploy/policy), else the project's name.
func ownerOf(app *unstructured.Unstructured, key string) string {
	if key == "" {
		key = OwnerLabel
	}
	if v := app.GetLabels()[key]; v != "" {
		return v
	}
	project, _, _ := unstructured.NestedString(app.Object, "spec", "project")
	return "project " + project
}

// response is what to do about a drifted field, by its class.
func response(f DriftedField, app *unstructured.Unstructured) string {
	heal := "Argo CD does not self-heal this Application: the drift stays until someone acts. "
	if f.SelfHeal {
		heal = ""
	}
	src := source(app)
	where := "the manifests"
	if src.Path != "" {
		where = src.Path
	}
	switch f.Class {
	case DriftBreakGlass:
		if f.Session != "" {
			return heal + "break-glass session " + f.Session + ": bring Git up to the fix (its ticket says how), then `" + RestoreCommand(f.App) + "`"
		}
		return heal + "a break-glass patch whose session is closed: move the value into Git or let Argo CD sync it back"
	case DriftManual, DriftPipeline:
		if img, ok := f.Live.(string); ok && strings.HasSuffix(f.Path, "/image") && strings.Contains(f.Path, "ontainers/") {
			if before, ok := f.Git.(string); ok && before != "" {
				name := before
				if i := strings.LastIndexAny(before, ":@"); i > strings.LastIndex(before, "/") {
					name = before[:i]
				}
				return heal + fmt.Sprintf("move it into Git: `kustomize edit set image %s=%s` in %s, or sync to drop it", name, img, where)
			}
		}
		if f.Path == "" {
			return heal + "move the change into Git in " + where + ", or sync to drop it"
		}
		return heal + fmt.Sprintf("move it into Git: set %s to %s in %s, or sync to drop it", f.Path, jsonText(f.Live), where)
	case DriftController:
		return heal + fmt.Sprintf("%s owns this field: remove %s from the manifests in %s, or ignore it: ignoreDifferences: [{group: %q, kind: %q, managedFieldsManagers: [%q]}]",
			f.Manager, dash(f.Path), where, f.Resource.Group, f.Resource.Kind, f.Manager)
	case DriftArgoCD:
		return heal + "Argo CD wrote it last: a sync is in progress or failed; look at the Application's sync status"
	case DriftUnknown:
		return heal + "its writer cannot be named (see the notes): find who changed it before moving it into Git or syncing it away"
	case DriftDeleted:
		return heal + "the resource is in Git but not in the cluster: sync to recreate it, or remove it from Git"
	default:
		return heal + fmt.Sprintf("set by defaulting or an admission webhook: ignore it: ignoreDifferences: [{group: %q, kind: %q, jsonPointers: [%q]}]", f.Resource.Group, f.Resource.Kind, dash(f.Path))
	}
}
