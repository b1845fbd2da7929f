//go:build tools

// Package tools records the S3-compatible server this module pins (versitygw:
// a Go S3 gateway whose posix backend implements versioning and Object Lock
// retention and legal holds), so that go mod tidy keeps its dependencies.
package tools

import (
	_ "github.com/versity/versitygw/cmd/versitygw"
)
