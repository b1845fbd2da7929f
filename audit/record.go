// Package audit is kubectl gitops's tamper-evident log of break-glass
// activity: the Record schema, its canonical JSON form, the SHA-256 hash
// chain, redaction, verification, and the stores that hold records (one
// immutable ConfigMap per record in the cluster, or a JSONL file). It knows
// nothing about cobra, terminals or Argo CD, and it must never let a secret
// value into a record: Redact runs before every hash.
package audit

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// SchemaVersion is the version of the Record layout this package writes.
// Version 2 hashes the RFC 8785 canonical form (see jcs); version 1
// records keep verifying under their own rule (see canonical).
const SchemaVersion = 2

// KeyPrefix starts every label and annotation key the project writes; the
// engine builds its own keys from it too.
const KeyPrefix = "kubectl-gitops.io/"

// Event names a state change a record documents (docs/design.md §6).
type Event string

// The events of a break-glass session, of its ticket, and of the log.
const (
	EventPlanned  Event = "breakglass.planned"
	EventPaused   Event = "breakglass.paused"
	EventPatched  Event = "breakglass.patched"
	EventTicketed Event = "breakglass.ticketed"
	EventAborted  Event = "breakglass.aborted"
	EventRestored Event = "breakglass.restored"
	EventForced   Event = "breakglass.forced"
	// EventReviewed is a second person's review of a closed session.
	EventReviewed Event = "breakglass.reviewed"
	// EventExpired and EventReenabled are notices about an open session,
	// written by whoever noticed (the in-cluster controller): its pause
	// expired while Git had not caught up, or automated sync was turned
	// back on behind it. They change nothing in the cluster.
	EventExpired   Event = "breakglass.expired"
	EventReenabled Event = "breakglass.reenabled"
	// EventAbandoned ends a patch whose run was interrupted (killed, its
	// connection lost) before it recorded the outcome, when the live target
	// shows the patch never landed. A patch that did land is recorded by
	// the resolver as breakglass.patched. Both name the interrupted run's
	// planned record (Resolves); the session goes on.
	EventAbandoned Event = "breakglass.abandoned"
	// EventRetargeted is a notice: the Application's sources, destination
	// or project no longer are those its open session was opened against
	// (Pinned), so whether Git caught up cannot be judged from it.
	EventRetargeted Event = "breakglass.retargeted"
	// EventReverted is a notice: a patched path of the open session no
	// longer holds the patched value live (a manual Sync, an apply of
	// Git's manifest, an operator); the record names the writer.
	EventReverted Event = "breakglass.reverted"
	// EventProposed is the Git change proposed for the open session's
	// fix: the branch and commit pushed, and the pull or merge request.
	// Anyone may propose (it changes nothing in the cluster).
	EventProposed Event = "breakglass.proposed"
	// EventOrphaned is a notice outside any session: an Application
	// paused with this project's paused-by mark that no open session of
	// the log accounts for, so Git stops deploying there for nobody.
	EventOrphaned Event = "breakglass.orphaned"
	EventQueued   Event = "ticket.queued"
	EventFiled    Event = "ticket.filed"
	EventFailed   Event = "ticket.failed"
	// EventHeadRepaired is outside any session: someone the admission
	// policy lets move the head back (a cluster admin) pointed it at the
	// log's end again, at this record; HeadBefore says what it named.
	// Verify takes it as having looked at the head findings before it.
	EventHeadRepaired Event = "audit.head-repaired"
)

// Events lists every event, in the order of a session's life, then the
// log's own.
var Events = []Event{EventPlanned, EventPaused, EventPatched, EventTicketed, EventAborted, EventRestored, EventForced, EventReviewed, EventExpired, EventReenabled, EventRetargeted, EventReverted, EventProposed, EventOrphaned, EventAbandoned, EventQueued, EventFiled, EventFailed, EventHeadRepaired}

// Record is one entry of the audit log. Seq, Prev and Hash are set by the
// store when the record is appended; Hash covers the canonical form of
// every other field, Prev included, so a record cannot be changed, dropped or
// moved without Verify noticing.
type Record struct {
	Schema      int         `json:"schema"`
	ID          string      `json:"id"`
	Seq         uint64      `json:"seq"`
	Time        time.Time   `json:"time"`
	Event       Event       `json:"event"`
	Session     string      `json:"session,omitempty"`
	Actor       Actor       `json:"actor"`
	Client      Client      `json:"client"`
	Reason      string      `json:"reason,omitempty"`
	Incident    string      `json:"incident,omitempty"`
	Application *AppRef     `json:"application,omitempty"`
	Cluster     *Cluster    `json:"cluster,omitempty"`
	Target      *Target     `json:"target,omitempty"`
	Patch       *Patch      `json:"patch,omitempty"`
	Changes     []Change    `json:"changes,omitempty"`
	SyncPolicy  *SyncPolicy `json:"syncPolicy,omitempty"`
	Ticket      *Ticket     `json:"ticket,omitempty"`
	Git         *Git        `json:"git,omitempty"`
	// OutOfSync is, on a patched record, whether the GitOps controller
	// flagged the target out of sync after the patch; nil when not known.
	// When false the patch only added fields Git never set, and the
	// resource being in sync again proves nothing.
	OutOfSync *bool `json:"outOfSync,omitempty"`
	// Expires is, on a planned record, when the session's pause expires
	// (nil: it does not); AutoRestore whether sync is to be restored with
	// no person once Git has caught up. The in-cluster controller acts on
	// these, as the log has them.
	Expires     *time.Time `json:"expires,omitempty"`
	AutoRestore bool       `json:"autoRestore,omitempty"`
	// Propose is, on the planned record that opens a session, whether its
	// fix is to be proposed in Git (breakglass --propose): the in-cluster
	// controller proposes it when no proposal is recorded.
	Propose bool `json:"propose,omitempty"`
	// Pinned is, on the planned record that opens a session, what the
	// Application rendered from when the session opened: its sources,
	// destination and project. Caught-up is judged against it alone.
	Pinned *Pin `json:"pinned,omitempty"`
	// Hold is, on the planned record that opens a session, how the session
	// holds the live fix and what the Application's ignoreDifferences were
	// before the hold added to them.
	Hold *Hold `json:"hold,omitempty"`
	// OwnNotice is, on the planned record that opens a session, the
	// Application's own Argo CD notice annotations, which the session's
	// banner replaces until it closes and every close puts back: from
	// here, never from the annotation anyone may edit.
	OwnNotice *OwnNotice `json:"ownNotice,omitempty"`
	Outcome   Outcome    `json:"outcome"`
	// Resolves is, on a breakglass.patched or breakglass.abandoned record
	// written for an interrupted run, the id of that run's planned record:
	// the session takes the patch from the planned record, not from this one.
	Resolves string `json:"resolves,omitempty"`
	// Review is a breakglass.reviewed record's verdict and note.
	Review *Review `json:"review,omitempty"`
	// TextCheck is set when the person confirmed text they typed (reason,
	// incident, note) that the secret check refuses otherwise: what it
	// found, never the text, which is redacted as always.
	TextCheck *TextCheck `json:"textCheck,omitempty"`
	// HeadFound is set by the store when the chain head it found named a
	// record the log does not hold as named (moved by hand): this record
	// links to the true tip instead, and Verify names the head.
	HeadFound *HeadState `json:"headFound,omitempty"`
	// Proposal is, on a breakglass.proposed record, the Git change
	// proposed for the session's fix.
	Proposal *Proposal `json:"proposal,omitempty"`
	// HeadBefore is, on an audit.head-repaired record, what the head
	// named before the repair (nil: there was no head).
	HeadBefore *HeadState `json:"headBefore,omitempty"`
	Prev       string     `json:"prev"`
	Hash       string     `json:"hash"`
}

// Proposal is a Git change proposed for a session's fix: where it was
// pushed, the files it edits, and the pull or merge request opened for it
// (Provider "none" when only the branch was pushed). RepoURL carries no
// credentials.
type Proposal struct {
	RepoURL  string   `json:"repoURL"`
	Base     string   `json:"base"`
	Branch   string   `json:"branch"`
	Commit   string   `json:"commit"`
	Files    []string `json:"files"`
	Provider string   `json:"provider"`
	Number   int      `json:"number,omitempty"`
	URL      string   `json:"url,omitempty"`
}

// Pin is what an Application renders from and where: the parts of its
// spec a session is opened against. Digest covers them whole (every Helm,
// Kustomize and plugin option, fields of newer Argo CD versions too), as
// the SHA-256 of their canonical JSON; the rest says which in words, with
// credentials taken out of repository URLs. Values such as Helm parameters
// are never kept: only the digest sees them.
type Pin struct {
	Digest      string         `json:"digest"`
	Sources     []PinnedSource `json:"sources,omitempty"`
	Destination PinnedCluster  `json:"destination"`
	Project     string         `json:"project,omitempty"`
}

// PinnedSource is one source (or the source hydrator's dry source) as
// people name it.
type PinnedSource struct {
	RepoURL        string `json:"repoURL,omitempty"`
	Path           string `json:"path,omitempty"`
	Chart          string `json:"chart,omitempty"`
	TargetRevision string `json:"targetRevision,omitempty"`
	// Hydrated is the branch the source hydrator writes to, for the
	// hydrator's dry source; "" otherwise.
	Hydrated string `json:"hydrated,omitempty"`
}

// PinnedCluster is an Application's destination.
type PinnedCluster struct {
	Server    string `json:"server,omitempty"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// Actor is the identity the API server reported for the caller.
type Actor struct {
	Username string   `json:"username"`
	UID      string   `json:"uid,omitempty"`
	Groups   []string `json:"groups,omitempty"`
}

// In says whether the actor is a member of group.
func (a Actor) In(group string) bool { return contains(a.Groups, group) }

// Client is the machine and local user the command ran as.
type Client struct {
	Host string `json:"host,omitempty"`
	User string `json:"user,omitempty"`
	// PID is the process that wrote the record: a run whose process is
	// gone from its host can no longer finish what it planned.
	PID int `json:"pid,omitempty"`
}

// AppRef names an Argo CD Application.
type AppRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Project   string `json:"project,omitempty"`
}

// Cluster is the destination cluster of the Application.
type Cluster struct {
	Server string `json:"server"`
}

// Target is the live resource a break-glass patched.
type Target struct {
	Group     string `json:"group"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// SameObject is whether t and o name the same object, whatever version.
func (t Target) SameObject(o Target) bool {
	return t.Group == o.Group && t.Kind == o.Kind && t.Namespace == o.Namespace && t.Name == o.Name
}

// String spells the target the way kubectl does: kind.group/name.
func (t Target) String() string {
	kind := strings.ToLower(t.Kind)
	if t.Group != "" {
		kind += "." + t.Group
	}
	return kind + "/" + t.Name
}

// Patch is the patch applied to the target: its body re-serialised with
// only the values the kind's schema keeps (package redact), and the
// HMAC-SHA256 (hex) of the body exactly as the user gave it under the
// installation's digest key KeyID, so that an auditor who holds the
// original and the key can prove it matches, and nobody who only reads the
// record can test guesses against it. SHA256 is the unkeyed digest records
// before keyed digests kept.
type Patch struct {
	Type   string `json:"type"`
	Body   string `json:"body"`
	HMAC   string `json:"hmac,omitempty"`
	KeyID  string `json:"keyId,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

// OwnNotice is an Application's own notice annotations (none: empty).
type OwnNotice struct {
	Annotations map[string]string `json:"annotations"`
}

// Hold is how a session holds its live fix: Mode "app" pauses automated
// sync and holds the patched paths (ignoreDifferences with the
// RespectIgnoreDifferences sync option), "sync" only pauses.
// IgnoreDifferences is the Application's spec.ignoreDifferences before the
// session (null when unset): the close writes it back. Own says it was
// saved whatever the mode (records before it saved it only for a hold of
// fields): an entry beyond those and the hold's own is then foreign.
type Hold struct {
	Mode              string `json:"mode"`
	IgnoreDifferences any    `json:"ignoreDifferences"`
	Own               bool   `json:"own,omitempty"`
}

// Change is one field the patch changed, with its values before and after.
type Change struct {
	Path   string `json:"path"`
	Before any    `json:"before"`
	After  any    `json:"after"`
}

// SyncPolicy is an Application's spec.syncPolicy before and after a change,
// as JSON values.
type SyncPolicy struct {
	Before any `json:"before"`
	After  any `json:"after"`
}

// Review is a second person's verdict on a closed session.
type Review struct {
	Verdict string `json:"verdict"`
	Note    string `json:"note"`
	// Overturns is, on an approval over a standing rejection, the id of
	// the rejection's record: the note says why it is overturned
	// (docs/design.md §8).
	Overturns string `json:"overturns,omitempty"`
}

// TextCheck records that a person confirmed their text despite the secret
// check, and which rule found something in which input.
type TextCheck struct {
	Confirmed bool          `json:"confirmed"`
	Findings  []TextFinding `json:"findings,omitempty"`
}

// TextFinding is one input in which a secret rule found something.
type TextFinding struct {
	Input string `json:"input"`
	Rule  string `json:"rule"`
}

// The verdicts of a review.
const (
	VerdictApproved = "approved"
	VerdictRejected = "rejected"
)

// Ticket is the Jira issue that tracks reconciling Git.
type Ticket struct {
	Key string `json:"key,omitempty"`
	URL string `json:"url,omitempty"`
}

// Git is the Git revision the Application was at, as the commit a user
// changes: for an Application using Argo CD's source hydrator, the dry
// commit (Hydrated is the rendered commit Argo CD synced); for one with
// several sources, the first source's (Revisions holds each source's, in
// spec.sources order).
type Git struct {
	Revision  string   `json:"revision"`
	Revisions []string `json:"revisions,omitempty"`
	Hydrated  string   `json:"hydrated,omitempty"`
}

// Outcome says whether the state change a record documents succeeded.
type Outcome struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// Outcome statuses. Queued is Jira work left for `ticket sync`; skipped is
// a ticket sync that found another run doing the same work.
const (
	StatusStarted   = "started"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusQueued    = "queued"
	StatusSkipped   = "skipped"
)

// canonical returns the canonical JSON of a stored record document, without
// its "hash" member: from schema 2 on, RFC 8785's (see jcs); for schema 1,
// Go's encoding of the decoded document (keys sorted by bytes, numbers as
// written, no insignificant space). Working on the document rather than on
// Record keeps fields a newer schema added inside the hash.
func canonical(doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the record")
	}
	delete(v, "hash")
	var buf bytes.Buffer
	if schema, _ := v["schema"].(json.Number); schema != "1" {
		err := jcs(&buf, v)
		return buf.Bytes(), err
	}
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// hashDocument returns the hex SHA-256 of a record document's canonical form.
func hashDocument(doc []byte) (string, error) {
	c, err := canonical(doc)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// Seal seals r as record seq after the record whose hash is prev, as an
// append does, and returns the document to store: for writing a chain in
// bulk (an import, a benchmark's seed), where reading the tip before each
// record is not needed.
func Seal(r *Record, seq uint64, prev string) ([]byte, error) { return seal(r, seq, prev) }

// seal redacts r, links it after (seq-1, prev) and computes its hash,
// returning the canonical document to store.
func seal(r *Record, seq uint64, prev string) ([]byte, error) {
	if r.Event == "" {
		return nil, errors.New("audit record has no event")
	}
	Redact(r)
	r.Schema, r.Seq, r.Prev, r.Hash = SchemaVersion, seq, prev, ""
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	r.Time = r.Time.UTC()
	if r.ID == "" {
		r.ID = newID(r.Time)
	}
	doc, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding audit record: %w", err)
	}
	if r.Hash, err = hashDocument(doc); err != nil {
		return nil, err
	}
	return json.Marshal(r)
}

// newID returns a record id that sorts by time and is unique in practice:
// the UTC second and 24 random bits.
func newID(t time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return t.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// Parse decodes a stored record document.
func Parse(doc []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(doc, &r); err != nil {
		return nil, fmt.Errorf("not an audit record: %w", err)
	}
	switch {
	case r.Schema < 1:
		return nil, errors.New("not an audit record: no schema version")
	case r.Seq == 0:
		return nil, errors.New("not an audit record: no sequence number")
	case r.ID == "" || r.Hash == "" || r.Event == "":
		return nil, errors.New("not an audit record: id, event or hash missing")
	}
	return &r, nil
}
