package breakglass

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/proposal"
	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// DriftField is a live field that differs from Git, to be moved into Git.
type DriftField struct {
	Target audit.Target
	Path   string
	// Why says who wrote it and how (for the request's description).
	Why string
}

// DriftProposeRequest is what `drift --propose` asks for: the fields of
// one Application to move into Git.
type DriftProposeRequest struct {
	ProposeRequest
	Fields []DriftField
}

// DriftBranch is the branch a drift proposal of app made at t is pushed to.
func DriftBranch(app string, t time.Time) string {
	return "kubectl-gitops/drift-" + app + "-" + t.UTC().Format("20060102-150405")
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
	now := time.Now()
	p.tag = "drift-" + now.UTC().Format("20060102-150405")
	if err := p.readSources(); err != nil {
		return nil, err
	}
	if p.edits, err = e.driftEdits(ctx, p, req.Fields); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kubectl-gitops-propose-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := p.edit(ctx, dir); err != nil {
		return nil, err
	}
	if err := p.describe(ctx, DriftBranch(req.App, now), ""); err != nil {
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

// driftEdits reads each field's live value; a Secret's, or one at a
// credential's path, is refused: Git would hold it in the clear.
func (e *Engine) driftEdits(ctx context.Context, p *proposing, fields []DriftField) ([]proposal.Edit, error) {
	cluster, err := e.ClusterOf(p.app, "")
	if err != nil {
		return nil, err
	}
	var edits []proposal.Edit
	for _, f := range fields {
		if f.Target.GroupKind().IsSecret() || redact.Path(f.Path) {
			return nil, fmt.Errorf("%w: %s %s may hold a secret, which would go into Git in the clear: move it by hand (a sealed or external secret)", ErrCannotPropose, f.Target, f.Path)
		}
		live, err := cluster.Object(ctx, f.Target)
		if err != nil {
			return nil, fmt.Errorf("reading the live %s: %w", f.Target, err)
		}
		v, found := audit.Lookup(live.Object, f.Path)
		if s, ok := v.(string); ok && redact.Text(s) != s {
			return nil, fmt.Errorf("%w: %s %s looks like a credential, which would go into Git in the clear: move it by hand", ErrCannotPropose, f.Target, f.Path)
		}
		edits = append(edits, proposal.Edit{Target: f.Target, Path: f.Path, Value: v, Delete: !found})
	}
	return edits, nil
}

// driftMessage is the commit message and the request's description of a
// drift proposal.
func driftMessage(app string, p *Proposed, fields []DriftField) (string, string) {
	var m, b strings.Builder
	fmt.Fprintf(&m, "%s: move live drift into Git\n\nThese fields were changed in the live cluster, not in Git; this writes their\nlive values here, so that Argo CD renders them and a sync keeps them.\n\n", app)
	fmt.Fprintf(&b, "Fields of Argo CD application `%s/%s` were changed in the live cluster, not in Git. This change writes their live values into Git (`kubectl gitops drift --propose`), so that a sync keeps them rather than reverting them.\n\n", p.App.Namespace, p.App.Name)
	for i, c := range p.Changes {
		why := ""
		if i < len(fields) && fields[i].Why != "" {
			why = " (" + fields[i].Why + ")"
		}
		fmt.Fprintf(&m, "- %s %s = %s (%s)\n", c.Target, c.Path, jsonText(c.Value), c.File)
		fmt.Fprintf(&b, "- `%s` `%s` = `%s` in `%s`%s\n", c.Target, c.Path, jsonText(c.Value), c.File, why)
	}
	b.WriteString("\nVerified before pushing: the edited source renders these values at these paths, and every other object and field as before.\n")
	return m.String(), b.String()
}
