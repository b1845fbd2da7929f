package breakglass

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/drift"
)

// ErrHoldNeedsAPI is a hold whose catch-up only the Argo CD API can judge,
// asked for without it.
var ErrHoldNeedsAPI = errors.New("this hold needs the Argo CD API")

// How a session holds the live fix (docs/design.md §4).
const (
	// HoldApp pauses automated sync and holds the patched paths through
	// Argo CD's own mechanism: an ignoreDifferences entry per patched
	// target, naming its paths, with the RespectIgnoreDifferences=true
	// sync option, so that every sync, automated or manual, keeps the live
	// value there. Argo CD then reports the held paths in sync whatever Git
	// says: whether Git caught up is judged field by field through the
	// Argo CD API, never from resource-level Synced.
	HoldApp = "app"
	// HoldSync only pauses automated sync (sessions opened before holds,
	// and --hold sync): a manual Sync reverts the fix, and resource-level
	// Synced stays an honest answer.
	HoldSync = "sync"
	// HoldFields holds the patched paths as HoldApp does and leaves
	// automated sync on: every other field and resource keeps deploying
	// from Git during the session (argo-cd#7975). It needs the field-level
	// check, which alone can say caught up under a hold.
	HoldFields = "fields"
)

// RespectIgnoreDifferences is the sync option that makes Argo CD keep the
// live value at ignoreDifferences paths when it syncs (Argo CD ≥ 2.3).
const RespectIgnoreDifferences = "RespectIgnoreDifferences=true"

// Holds are the hold modes a user may ask for.
var Holds = []string{HoldApp, HoldSync, HoldFields}

// holdsFields is whether session s holds its patched paths (ignoreDifferences).
func (s *Session) holdsFields() bool { return holdsFields(s.Hold) }

func holdsFields(hold string) bool { return hold == HoldApp || hold == HoldFields }

// pauses is whether session s pauses automated sync (all but HoldFields).
func (s *Session) pauses() bool { return s.Hold != HoldFields }

// holdOf is how a new session holds its fix: as asked, else as the
// target namespace's contract says, else HoldApp where the field-level
// check is there to judge it and HoldSync (with a warning) where it is
// not. HoldFields without the field-level check is refused.
func holdOf(req Request, contract drift.Contract) (hold, warning string, err error) {
	switch hold = req.Hold; {
	case hold != "":
	case contract.Hold != "":
		if !slices.Contains(Holds, contract.Hold) {
			return "", "", fmt.Errorf("%w: namespace %s declares %s: %q, which is none of %s: its owners must fix the annotation", drift.ErrContract, contract.Namespace, drift.ContractHold, contract.Hold, strings.Join(Holds, ", "))
		}
		hold = contract.Hold
	case req.FieldLevel:
		hold = HoldApp
	default:
		hold = HoldSync
		warning = "the fix is held by the pause only (--hold sync): a manual Sync in Argo CD would revert it. Set ARGOCD_SERVER (a read-only account is enough) for --hold app, which holds the patched fields through every sync"
	}
	if hold == HoldFields && !req.FieldLevel {
		return "", "", fmt.Errorf("%w: --hold fields leaves automated sync on, and under it only the field-level check through the Argo CD API can tell when Git has caught up: set ARGOCD_SERVER and ARGOCD_AUTH_TOKEN (a read-only account is enough), or use --hold app", ErrHoldNeedsAPI)
	}
	return hold, warning, nil
}

// heldEntry is the ignoreDifferences entry that holds the paths of a patch
// of target: one jq path expression per path, list items by name as the
// session spells them (obj, the target after the patch, tells a named
// list from a map).
func heldEntry(target audit.Target, fields []PatchedField, obj map[string]any) map[string]any {
	exprs := make([]any, 0, len(fields))
	for _, f := range fields {
		exprs = append(exprs, jqPath(f.Path, obj))
	}
	entry := map[string]any{"kind": target.Kind, "name": target.Name, "jqPathExpressions": exprs}
	if target.Group != "" {
		entry["group"] = target.Group
	}
	if target.Namespace != "" {
		entry["namespace"] = target.Namespace
	}
	return entry
}

var jqIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// holdPatch is the spec part of the write that holds a patch of target
// (fields, obj the target after the patch) in app: its ignoreDifferences
// entry appended to app's own, and RespectIgnoreDifferences=true added to
// the sync options, each only when not there yet. nil when nothing
// changes.
func holdPatch(app argocd.App, target audit.Target, fields []PatchedField, obj map[string]any) map[string]any {
	spec := map[string]any{}
	entries := app.IgnoreDifferences()
	entry := heldEntry(target, fields, obj)
	held := false
	for _, e := range entries {
		held = held || equalJSON(e, entry)
	}
	if !held {
		spec["ignoreDifferences"] = append(entries, entry)
	}
	options := app.SyncOptions()
	if !hasOption(options) {
		all := make([]any, 0, len(options)+1)
		for _, o := range options {
			all = append(all, o)
		}
		spec["syncPolicy"] = map[string]any{"syncOptions": append(all, RespectIgnoreDifferences)}
	}
	if len(spec) == 0 {
		return nil
	}
	return spec
}

func hasOption(options []string) bool {
	for _, o := range options {
		if o == RespectIgnoreDifferences {
			return true
		}
	}
	return false
}

// releasePatch is the spec part of a close that puts back what s's hold
// changed: ignoreDifferences exactly as saved, and, when the sync policy
// is not written back whole (sync on again behind the session), the sync
// options as saved. nil when s saved no entries of the Application (a
// session opened before every hold saved them, holding no fields).
func releasePatch(app argocd.App, s *Session, wholePolicy bool) (map[string]any, error) {
	if !s.holdsFields() && !s.ownIgnoreSaved {
		return nil, nil
	}
	var saved any
	if len(s.SavedIgnoreDifferences) > 0 {
		if err := json.Unmarshal(s.SavedIgnoreDifferences, &saved); err != nil {
			return nil, fmt.Errorf("the session's saved ignoreDifferences are unreadable: %w", err)
		}
	}
	spec := map[string]any{}
	current, has := app.IgnoreDifferencesAsIs()
	if saved == nil && has {
		spec["ignoreDifferences"] = nil
	} else if saved != nil && !equalJSON(current, saved) {
		spec["ignoreDifferences"] = saved
	}
	if !wholePolicy {
		var policy map[string]any
		if err := json.Unmarshal(s.SavedSyncPolicy, &policy); err != nil && len(s.SavedSyncPolicy) > 0 && string(s.SavedSyncPolicy) != "null" {
			return nil, fmt.Errorf("the session's saved sync policy is unreadable: %w", err)
		}
		options, has := app.SyncOptionsAsIs()
		if want, ok := policy["syncOptions"]; ok && !equalJSON(options, want) {
			spec["syncPolicy"] = map[string]any{"syncOptions": want}
		} else if !ok && has {
			spec["syncPolicy"] = map[string]any{"syncOptions": nil}
		}
	}
	if len(spec) == 0 {
		return nil, nil
	}
	return spec, nil
}

// savedIgnore is app's spec.ignoreDifferences as JSON (null when unset).
func savedIgnore(app argocd.App) json.RawMessage {
	current, _ := app.IgnoreDifferencesAsIs()
	b, _ := json.Marshal(current)
	return b
}

// HeldEntries are the ignoreDifferences entries of app that its open
// session's hold added (not among the entries it saved), each as JSON:
// debt names them as the session's, not as owned debt.
func HeldEntries(app argocd.App) (session string, held []any) {
	s, err := SessionOf(app)
	if err != nil || !s.holdsFields() {
		return "", nil
	}
	saved := s.savedEntries()
	for _, e := range app.IgnoreDifferences() {
		if !anyEqual(e, saved) {
			held = append(held, e)
		}
	}
	return s.ID, held
}

// savedEntries are the Application's own ignoreDifferences entries as s
// saved them (none when it saved none).
func (s *Session) savedEntries() []any {
	var saved []any
	_ = json.Unmarshal(s.SavedIgnoreDifferences, &saved)
	return saved
}

// anyEqual is whether entry e is one of list, as JSON.
func anyEqual(e any, list []any) bool {
	for _, o := range list {
		if equalJSON(e, o) {
			return true
		}
	}
	return false
}
