package breakglass

import (
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/proposal"
)

// TestASourceOthersReadIsNamed: a source whose files another source
// reads as Helm value files ($REF/…) changes what that one renders too.
func TestASourceOthersReadIsNamed(t *testing.T) {
	values := proposal.Source{Position: 1, Ref: "values", Path: "values"}
	chart := proposal.Source{Position: 2, Path: "chart"}
	chart.Helm.ValueFiles = []string{"$values/prod.yaml"}
	if got := lentTo([]proposal.Source{values, chart}, values); got != "source 2" {
		t.Errorf("a ref read by source 2: %q", got)
	}
	if got := lentTo([]proposal.Source{values, chart}, chart); got != "" {
		t.Errorf("a source with no ref: %q", got)
	}
	unread := proposal.Source{Position: 1, Ref: "other"}
	if got := lentTo([]proposal.Source{unread, chart}, unread); got != "" {
		t.Errorf("a ref nobody reads: %q", got)
	}
}
