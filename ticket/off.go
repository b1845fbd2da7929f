package ticket

import "context"

// Off is the ticket system when Jira cannot be used: not configured, or
// configured wrongly. Ready and every call answer why, so the engine
// queues the work for `ticket sync` instead of doing it.
type Off struct {
	// Why Jira is off; nil means it is not configured.
	Why error
}

// Ready says why there are no tickets.
func (o Off) Ready() error {
	if o.Why == nil {
		return ErrNotConfigured
	}
	return o.Why
}

// Create files nothing.
func (o Off) Create(context.Context, Reconcile) (Issue, error) { return Issue{}, o.Ready() }

// FindSession finds nothing.
func (o Off) FindSession(context.Context, string) (Issue, bool, error) {
	return Issue{}, false, o.Ready()
}

// Get reads nothing.
func (o Off) Get(context.Context, string) (Issue, error) { return Issue{}, o.Ready() }

// Comment comments nowhere.
func (o Off) Comment(context.Context, string, string) error { return o.Ready() }

// Close closes nothing.
func (o Off) Close(context.Context, string, string) error { return o.Ready() }

// LinkTo links nothing.
func (o Off) LinkTo(context.Context, string, string, string) error { return o.Ready() }
