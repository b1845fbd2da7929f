// Command kubectl-gitops is the kubectl gitops plugin: an audited break-glass
// path for Argo CD Applications. All behaviour lives in package plugin.
package main

import (
	"os"

	"github.com/kubectl-gitops/kubectl-gitops/plugin"
)

func main() {
	os.Exit(plugin.Main(os.Args[1:]))
}
