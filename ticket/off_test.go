package ticket

import (
	"context"
	"errors"
	"testing"
)

// TestOffAnswersWhyToEveryCall: with Jira off, no call may look as if it
// worked, and each says why, so the engine queues the work.
func TestOffAnswersWhyToEveryCall(t *testing.T) {
	wrong := errors.New("JIRA_URL is not a URL")
	ctx := context.Background()
	for _, c := range []struct {
		off  Off
		want error
	}{{Off{}, ErrNotConfigured}, {Off{Why: wrong}, wrong}} {
		_, err1 := c.off.Create(ctx, Reconcile{})
		_, found, err2 := c.off.FindSession(ctx, "s")
		_, err3 := c.off.Get(ctx, "OPS-1")
		for i, err := range []error{c.off.Ready(), err1, err2, err3, c.off.Comment(ctx, "OPS-1", "x"), c.off.Close(ctx, "OPS-1", "x"), c.off.LinkTo(ctx, "OPS-1", "u", "t")} {
			if !errors.Is(err, c.want) {
				t.Errorf("%+v call %d: %v, want %v", c.off, i, err, c.want)
			}
		}
		if found {
			t.Errorf("%+v found a session", c.off)
		}
	}
}
