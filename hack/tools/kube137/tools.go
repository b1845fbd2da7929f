//go:build tools

// Package tools records the control-plane command this module pins, so that
// go mod tidy keeps its dependencies.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
