package breakglass

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
	"github.com/kubectl-gitops/kubectl-gitops/proposal"
	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// DriftField is a live field that differs from Git, to be moved into Git.
type DriftField struct {
	Target audit.Target
	Path   string
	// Git is the value Git renders there (nil: none).
	Git any
	// Why says who wrote it and how (for the request's description).
	Why string
}

// DriftProposeRequest is what `drift --propose` asks for: the fields of
// one Application to move into Git.
type DriftProposeRequest struct {
	ProposeRequest
	Fields []DriftField
}

// DriftBranch is the branch a drift proposal of app is pushed to, named
// by what it writes: the same drift proposed again finds its branch there.
func DriftBranch(app string, edits []proposal.Edit) string {
	return "kubectl-gitops/drift-" + app + "-" + digest(edits)[len("sha256:"):][:12]
}

// ProposeDrift writes the live value of each field into the Application's
// source, as Propose does a session's fix ("move the patch into Git"): it
// reads each value live, edits the source that renders the object,
// verifies the source then renders those values and nothing else changed,
// pushes a branch with the user's own Git credentials and opens a pull or
// merge request. No value of a Secret or of a credential's path is ever
// written. Nothing is recorded in the audit log: no session holds drift,
// and the request is its record.
func (e *Engine) ProposeDrift(ctx context.Context, req DriftProposeRequest) (*Proposed, error) {
	if len(req.Fields) == 0 {
		return nil, fmt.Errorf("%w: no manual or pipeline drift on %s to move into Git", ErrNothingToDo, req.App)
	}
	p := &proposing{Engine: e, req: req.ProposeRequest}
	var err error
	if p.actor, err = e.Whoami(ctx); err != nil {
		return nil, err
	}
	if p.app, err = e.App(ctx, e.Ref(req.App)); err != nil {
		return nil, err
	}
	if s, err := SessionOf(p.app); err == nil && s != nil {
		// Its fields go into Git through propose, checked against the
		// log; a field of it edited since would slip past that check.
		return nil, fmt.Errorf("%w on %s: break-glass session %s is open: propose its fix with `%s`, then move the rest of the drift", ErrSessionOpen, req.App, s.ID, next.Propose(p.app.GetNamespace(), req.App))
	}
	if err := p.readSources(); err != nil {
		return nil, err
	}
	if p.edits, err = e.driftEdits(ctx, p, req.Fields); err != nil {
		return nil, err
	}
	branch := DriftBranch(req.App, p.edits)
	p.tag = strings.TrimPrefix(branch, "kubectl-gitops/")
	dir, err := os.MkdirTemp("", "kubectl-gitops-propose-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := p.edit(ctx, dir); err != nil {
		return nil, err
	}
	if err := p.describe(ctx, branch, ""); err != nil {
		return nil, err
	}
	if req.DryRun {
		return p.out, nil
	}
	message, body := driftMessage(p.app.GetName(), p.out, req.Fields)
	openErr, err := p.push(ctx, message, body)
	if err != nil {
		return nil, err
	}
	if openErr != nil {
		return p.out, fmt.Errorf("branch %s is pushed, but opening the %s request failed: %w", p.out.Proposal.Branch, p.out.Proposal.Provider, openErr)
	}
	return p.out, nil
}

// driftEdits reads each field's live value. Only a value the audit log
// would keep in the clear goes into Git (redact.At leaves it whole, and no
// secret flag comes before it), never one that replaces a reference to a
// Secret: Git would hold a secret in the clear, and a commit is forever.
func (e *Engine) driftEdits(ctx context.Context, p *proposing, fields []DriftField) ([]proposal.Edit, error) {
	cluster, err := e.ClusterOf(p.app, "")
	if err != nil {
		return nil, err
	}
	var edits []proposal.Edit
	for _, f := range fields {
		live, err := cluster.Object(ctx, f.Target)
		if err != nil {
			return nil, fmt.Errorf("reading the live %s: %w", f.Target, err)
		}
		v, found := audit.Lookup(live.Object, f.Path)
		if why := secretIn(f, v, live.Object); why != "" {
			return nil, fmt.Errorf("%w: %s %s %s, which would go into Git in the clear: move it by hand (a sealed or external secret)", ErrCannotPropose, f.Target, f.Path, why)
		}
		edits = append(edits, proposal.Edit{Target: f.Target, Path: f.Path, Value: v, Delete: !found})
	}
	return edits, nil
}

// secretIn says how live value v of field f (in object live) may be or
// hold a secret, "" when it cannot.
func secretIn(f DriftField, v any, live map[string]any) string {
	switch {
	case f.Target.GroupKind().IsSecret():
		return "is a Secret's"
	case !reflect.DeepEqual(redact.At(f.Target.GroupKind(), f.Path, v), v):
		return "holds what the audit log would redact (a credential's name or shape, or free text)"
	case redact.AfterSecretFlag(f.Path, []map[string]any{live}):
		return "follows a secret's flag"
	case refersToSecret(f.Git):
		return "replaces Git's reference to a Secret"
	}
	return ""
}

// refersToSecret is whether v names a Secret to read from: secretKeyRef,
// secretRef, a secret volume.
func refersToSecret(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		for k, sub := range t {
			if k == "secretKeyRef" || k == "secretRef" || k == "secret" || refersToSecret(sub) {
				return true
			}
		}
	case []any:
		for _, sub := range t {
			if refersToSecret(sub) {
				return true
			}
		}
	}
	return false
}

// driftMessage is the commit message and the request's description of a
// drift proposal.
func driftMessage(app string, p *Proposed, fields []DriftField) (string, string) {
	var m, b strings.Builder
	fmt.Fprintf(&m, "%s: move live drift into Git\n\nThese fields were changed in the live cluster, not in Git; this writes their\nlive values here, so that Argo CD renders them and a sync keeps them.\n\n", app)
	writeChanges(&m, p.Changes)
	fmt.Fprintf(&b, "Fields of Argo CD application `%s/%s` were changed in the live cluster, not in Git. This change writes their live values into Git (`%s`), so that a sync keeps them rather than reverting them.\n\n", p.App.Namespace, p.App.Name, next.DriftPropose(p.App.Namespace, p.App.Name))
	for i, c := range p.Changes {
		why := ""
		if i < len(fields) && fields[i].Why != "" {
			why = " (" + fields[i].Why + ")"
		}
		fmt.Fprintf(&b, "- `%s` `%s` = `%s` in `%s`%s\n", c.Target, c.Path, jsonText(c.Value), c.File, why)
	}
	b.WriteString("\nVerified before pushing: the edited source renders these values at these paths, and every other object and field as before.\n")
	return m.String(), b.String()
}
