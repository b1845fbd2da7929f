package next

import "testing"

func TestRestoreNamesTheNamespaceOnlyOutsideArgoCDs(t *testing.T) {
	for _, c := range []struct{ namespace, want string }{
		{"", "kubectl gitops restore web"},
		{"argocd", "kubectl gitops restore web"},
		{"team-a", "kubectl gitops restore web --app-namespace team-a"},
	} {
		if got := Restore(c.namespace, "web"); got != c.want {
			t.Errorf("Restore(%q, web) = %q, want %q", c.namespace, got, c.want)
		}
	}
}
