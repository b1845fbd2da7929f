//go:build tools

// Package tools records the SBOM generator this module pins, so that go mod
// tidy keeps its dependencies.
package tools

import (
	_ "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod"
)
