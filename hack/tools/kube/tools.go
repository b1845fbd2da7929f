//go:build tools

// Package tools records the control-plane commands this module pins, so that
// go mod tidy keeps their dependencies.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
