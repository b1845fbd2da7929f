//go:build tools

// Package tools records the krew commands this module pins, so that go mod
// tidy keeps their dependencies.
package tools

import (
	_ "sigs.k8s.io/krew/cmd/krew"
	_ "sigs.k8s.io/krew/cmd/validate-krew-manifest"
)
