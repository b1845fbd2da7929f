package drift

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/next"
)

// DebtAnnotation records, on an Application (or on argocd-cm for the
// system-level entries), who owns each ignoreDifferences entry, why it
// exists and when to review it: a JSON object keyed by entry id.
const DebtAnnotation = audit.KeyPrefix + "debt"

// DebtNote is what DebtAnnotation says of one entry.
type DebtNote struct {
	Owner      string    `json:"owner"`
	Reason     string    `json:"reason"`
	Review     string    `json:"review"` // YYYY-MM-DD
	RecordedBy string    `json:"recordedBy,omitempty"`
	RecordedAt time.Time `json:"recordedAt,omitempty"`
}

// The findings debt flags.
const (
	DebtNoOwner    = "no-owner"
	DebtOverdue    = "review-overdue"
	DebtUnused     = "matches-nothing"
	DebtOverCap    = "over-cap"
	DebtNoReview   = "no-review-date"
	DebtBadNoteKey = "note-for-missing-entry"
	DebtUnreadable = "notes-unreadable"
)

// DebtEntry is one ignoreDifferences entry with its recorded note and what
// is wrong with it.
type DebtEntry struct {
	App audit.AppRef `json:"application"`
	// System is set for the entries of argocd-cm, which hold for every
	// Application (Key is then the argocd-cm key).
	System bool           `json:"system,omitempty"`
	Key    string         `json:"key,omitempty"`
	ID     string         `json:"id"`
	Entry  map[string]any `json:"entry"`
	Note   *DebtNote      `json:"note,omitempty"`
	Flags  []string       `json:"flags,omitempty"`
	// HeldBy is the open break-glass session whose hold added the entry:
	// it is the session's, goes with its restore, and is no owned debt.
	HeldBy string `json:"heldBy,omitempty"`
}

// DebtID names an entry by its content: the first 12 hex digits of the
// SHA-256 of its JSON (keys sorted), so it stays put when entries move.
func DebtID(entry any) string {
	b, _ := json.Marshal(entry)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:12]
}

// Debt lists the ignoreDifferences entries of apps and of argocd-cm, each
// with its note and flags: no owner or review date, a review in the past
// (as of now), an Application entry matching none of its managed
// resources, and entries of an Application over maxPerApp (0: no cap).
func Debt(ctx context.Context, c *argocd.Client, apps []argocd.App, maxPerApp int, now time.Time, system bool) ([]DebtEntry, error) {
	var out []DebtEntry
	for _, app := range apps {
		ref := app.Record()
		notes, unreadable := debtNotes(app.GetAnnotations()[DebtAnnotation])
		entries := app.IgnoreDifferences()
		seen := map[string]bool{}
		for _, raw := range entries {
			entry, _ := raw.(map[string]any)
			d := DebtEntry{App: ref, ID: DebtID(raw), Entry: entry}
			seen[d.ID] = true
			d.Note = notes[d.ID]
			d.Flags = noteFlags(d.Note, now)
			if unreadable != nil {
				d.Flags = append(d.Flags, DebtUnreadable)
			}
			if !matchesResource(app, entry) {
				d.Flags = append(d.Flags, DebtUnused)
			}
			if maxPerApp > 0 && len(entries) > maxPerApp {
				d.Flags = append(d.Flags, DebtOverCap)
			}
			out = append(out, d)
		}
		for _, id := range sortedNoteIDs(notes) {
			if !seen[id] {
				out = append(out, DebtEntry{App: ref, ID: id, Note: notes[id], Flags: []string{DebtBadNoteKey}})
			}
		}
	}
	if !system {
		return out, nil
	}
	cm, err := c.Kube.CoreV1().ConfigMaps(c.ArgoNS()).Get(ctx, "argocd-cm", metav1.GetOptions{})
	if err != nil {
		return out, fmt.Errorf("reading argocd-cm for the system-level entries: %w", err)
	}
	notes, unreadable := debtNotes(cm.GetAnnotations()[DebtAnnotation])
	var keys []string
	for k := range cm.Data {
		if strings.HasPrefix(k, "resource.customizations.ignoreDifferences.") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		entry := map[string]any{"argocd-cm": k, "value": cm.Data[k]}
		d := DebtEntry{System: true, Key: k, ID: DebtID(entry), Entry: entry}
		d.Note = notes[d.ID]
		d.Flags = noteFlags(d.Note, now)
		if unreadable != nil {
			d.Flags = append(d.Flags, DebtUnreadable)
		}
		out = append(out, d)
	}
	return out, nil
}

// debtNotes reads a DebtAnnotation; an unreadable one reads as no notes,
// with its error.
func debtNotes(annotation string) (map[string]*DebtNote, error) {
	notes := map[string]*DebtNote{}
	if annotation == "" {
		return notes, nil
	}
	if err := json.Unmarshal([]byte(annotation), &notes); err != nil || notes == nil {
		return map[string]*DebtNote{}, fmt.Errorf("the %s annotation is not a JSON object of notes", DebtAnnotation)
	}
	return notes, nil
}

func sortedNoteIDs(notes map[string]*DebtNote) []string {
	ids := make([]string, 0, len(notes))
	for id := range notes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func noteFlags(n *DebtNote, now time.Time) []string {
	switch {
	case n == nil || strings.TrimSpace(n.Owner) == "":
		return []string{DebtNoOwner}
	case n.Review == "":
		return []string{DebtNoReview}
	}
	review, err := time.Parse("2006-01-02", n.Review)
	if err != nil || !now.Before(review.AddDate(0, 0, 1)) {
		return []string{DebtOverdue}
	}
	return nil
}

// matchesResource is whether an Application's ignoreDifferences entry
// names at least one of its managed resources (group, kind, and name and
// namespace when it gives them).
func matchesResource(app argocd.App, entry map[string]any) bool {
	str := func(key string) string { s, _ := entry[key].(string); return s }
	for _, r := range app.StatusResources() {
		t := r.Target
		if t.Group == str("group") && t.Kind == str("kind") &&
			(str("name") == "" || str("name") == t.Name) &&
			(str("namespace") == "" || str("namespace") == t.Namespace) {
			return true
		}
	}
	return false
}

// RecordDebt writes the note of entry id of Application app, guarded by
// the resourceVersion it read: the entry must still be there.
func RecordDebt(ctx context.Context, c *argocd.Client, app, id string, note DebtNote) error {
	if strings.TrimSpace(note.Owner) == "" || strings.TrimSpace(note.Reason) == "" {
		return argocd.Invalid(InputDebtNote, "", "an owner and a reason are both required")
	}
	if _, err := time.Parse("2006-01-02", note.Review); err != nil {
		return argocd.Invalid(InputDebtNote, note.Review, "the review date is YYYY-MM-DD")
	}
	actor, err := c.Whoami(ctx)
	if err != nil {
		return err
	}
	note.RecordedBy, note.RecordedAt = actor.Username, time.Now().UTC().Truncate(time.Second)
	var notes map[string]*DebtNote
	_, err = c.Write(ctx, argocd.Known(argocd.AppRef{Namespace: c.AppNamespace, Name: app}), argocd.Write{Check: func(a argocd.App) error {
		entries := a.IgnoreDifferences()
		for _, raw := range entries {
			if DebtID(raw) == id {
				var err error
				if notes, err = debtNotes(a.GetAnnotations()[DebtAnnotation]); err != nil {
					return fmt.Errorf("%w: %v: recording would drop the notes in it; fix or remove it first", argocd.ErrConflict, err)
				}
				return nil
			}
		}
		return fmt.Errorf("%w: application %s has no ignoreDifferences entry %s (%s lists them)", argocd.ErrNotFound, app, id, next.Debt(app))
	}, Patch: func(argocd.App) map[string]any {
		notes[id] = &note
		value, _ := json.Marshal(notes)
		return map[string]any{"metadata": map[string]any{"annotations": map[string]any{DebtAnnotation: string(value)}}}
	}})
	return err
}

// InputDebtNote is the note a user records on an ignoreDifferences entry.
const InputDebtNote argocd.Input = "debt note"
