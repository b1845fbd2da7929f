package breakglass

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// SessionAnnotation holds the open break-glass session on an Application.
const SessionAnnotation = audit.KeyPrefix + "session"

// RefreshAnnotation asks Argo CD's controller to reconcile an Application now;
// the controller removes it when done.
const RefreshAnnotation = "argocd.argoproj.io/refresh"

// HydrateAnnotation asks Argo CD's source hydrator to render the dry
// source's newest commit now; the controller removes it.
const HydrateAnnotation = "argocd.argoproj.io/hydrate"

// The timestamp annotations name one refresh (or hydrate) request, as
// Argo CD's own refresh sets them (util/argo.RefreshApp, Argo CD >= 3.6): a
// controller finishing a reconcile that began before the request then
// leaves the request in place instead of removing it, so "the refresh
// annotation is gone" means a reconcile that started after the request.
// Older controllers ignore them.
const (
	RefreshTimestampAnnotation = "argocd.argoproj.io/refresh-timestamp"
	HydrateTimestampAnnotation = "argocd.argoproj.io/hydrate-timestamp"
)

// refreshRequest adds a normal refresh request to annotations, hydrate
// too when set, each with a timestamp of its own.
func refreshRequest(annotations map[string]any, hydrate bool) map[string]any {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	annotations[RefreshAnnotation], annotations[RefreshTimestampAnnotation] = "normal", now
	if hydrate {
		annotations[HydrateAnnotation], annotations[HydrateTimestampAnnotation] = "normal", now
	}
	return annotations
}

// Session states, in order.
const (
	StatePausing = "pausing"
	StatePaused  = "paused"
	StatePatched = "patched"
)

// Session is the state of an open break-glass, kept as JSON in one
// annotation on the Application so that any later command can see it.
type Session struct {
	ID       string    `json:"id"`
	State    string    `json:"state"`
	OpenedBy string    `json:"openedBy"`
	OpenedAt time.Time `json:"openedAt"`
	Reason   string    `json:"reason"`
	Incident string    `json:"incident,omitempty"`
	// SavedSyncPolicy is spec.syncPolicy exactly as it was before the pause
	// (null when the Application had none); restore writes it back.
	SavedSyncPolicy json.RawMessage `json:"savedSyncPolicy"`
	PausedParents   []PausedParent  `json:"pausedParents,omitempty"`
	Patches         []SessionPatch  `json:"patches,omitempty"`
	// Ticket is the Jira issue tracking the session; TicketPending says
	// why Jira work is still queued for `ticket sync` ("" when none).
	Ticket        string `json:"ticket,omitempty"`
	TicketURL     string `json:"ticketURL,omitempty"`
	TicketPending string `json:"ticketPending,omitempty"`
	// GitRevision is where Git stood when the session opened, as audit.Git
	// has it; GitRevisions holds each source's, for several sources.
	GitRevision  string   `json:"gitRevision,omitempty"`
	GitRevisions []string `json:"gitRevisions,omitempty"`
	// TerminatedSync is when the sync operation this session terminated
	// before patching had started; empty when none was running.
	TerminatedSync string `json:"terminatedSync,omitempty"`
}

// SessionPatch is one patch of the session: which fields it changed, with
// digests of their values, never the values (those live in the audit
// record), so the annotation stays small whatever the patch.
type SessionPatch struct {
	Target audit.Target   `json:"target"`
	Type   string         `json:"type"`
	Fields []PatchedField `json:"fields"`
	At     time.Time      `json:"at"`
	// ArgoSawPatch is whether Argo CD flagged the patched resource
	// OutOfSync after the patch; nil until known. When false, the patch only
	// added fields Git never set and resource-level Synced proves nothing.
	ArgoSawPatch *bool `json:"argoSawPatch,omitempty"`
	// ID names the patch within the session; Pending is set while it is
	// being sent (the session learns of a patch before the target does).
	ID      string `json:"id,omitempty"`
	Pending bool   `json:"pending,omitempty"`
	// LegacyChanges are the values sessions opened by v0.1 kept; ParseSession
	// turns them into Fields.
	LegacyChanges []audit.Change `json:"changes,omitempty"`
}

// PatchedField is one field a patch changed: its path (list items by
// name, as Diff spells it) and the SHA-256 digests of its canonical JSON
// value before and after, which the catch-up check compares with Git. A
// secret field keeps no digests: a digest of a short password can be
// guessed.
type PatchedField struct {
	Path   string `json:"path"`
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
	Secret bool   `json:"secret,omitempty"`
}

// ParseSession decodes the session annotation.
func ParseSession(value string) (*Session, error) {
	var s Session
	if err := json.Unmarshal([]byte(value), &s); err != nil {
		return nil, fmt.Errorf("the %s annotation is not a session: %w", SessionAnnotation, err)
	}
	// The admission policy compares session ids by this prefix (CEL reads
	// no JSON): a value whose id is spelt elsewhere, or twice, is not one
	// the tool wrote.
	if prefix, _ := json.Marshal(struct {
		ID string `json:"id"`
	}{s.ID}); s.ID == "" || !strings.HasPrefix(value, strings.TrimSuffix(string(prefix), "}")+",") {
		return nil, fmt.Errorf("the %s annotation is not a session the tool wrote: it must start with its id, {\"id\":\"…\",", SessionAnnotation)
	}
	for i := range s.Patches {
		p := &s.Patches[i]
		for _, c := range p.LegacyChanges {
			if c.Before == audit.Redacted || c.After == audit.Redacted {
				p.Fields = append(p.Fields, PatchedField{Path: c.Path, Secret: true})
				continue
			}
			p.Fields = append(p.Fields, PatchedField{Path: c.Path, Before: digest(c.Before), After: digest(c.After)})
		}
		p.LegacyChanges = nil
	}
	return &s, nil
}
