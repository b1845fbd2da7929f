package breakglass

import (
	"context"
	"errors"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// headRepairer is a store whose head can be put back on the log
// (audit.ConfigMapStore).
type headRepairer interface {
	RepairHead(ctx context.Context, r *audit.Record) error
}

// ErrNoHead is a repair asked of an audit log that keeps no head (a file).
var ErrNoHead = errors.New("this audit log keeps no head to repair")

// RepairAuditHead points the audit log's head back at the log's end,
// recorded as audit.head-repaired in the caller's name, with what the head
// said before. The record is returned once it is written, also when the
// head could then not be moved (the error says so); nil means nothing was
// written. The admission policy refuses the repair to the on-call,
// auditor and reviewer groups.
func (e *Engine) RepairAuditHead(ctx context.Context) (*audit.Record, error) {
	store, ok := e.Audit.(headRepairer)
	if !ok {
		return nil, ErrNoHead
	}
	actor, err := e.Whoami(ctx)
	if err != nil {
		return nil, err
	}
	r := &audit.Record{Event: audit.EventHeadRepaired, Actor: actor, Client: clientInfo(), Outcome: audit.Outcome{Status: audit.StatusSucceeded}}
	if err := store.RepairHead(ctx, r); err != nil {
		if r.Seq == 0 {
			return nil, err
		}
		return r, err
	}
	return r, nil
}
