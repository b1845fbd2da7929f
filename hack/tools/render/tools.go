//go:build tools

// Package tools records the renderers this module pins (helm and kustomize,
// the versions Argo CD's repo-server image bundles), so that go mod tidy
// keeps their dependencies.
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
	_ "sigs.k8s.io/kustomize/kustomize/v5"
)
