//go:build tools

// Package tools records the Argo CD command this module pins, so that go mod
// tidy keeps its dependencies.
package tools

import _ "github.com/argoproj/argo-cd/v3/cmd"
