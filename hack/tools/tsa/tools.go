//go:build tools

// Module tsa pins sigstore's timestamp-authority, an RFC 3161 timestamp
// authority, built by hack/tools/build.sh into a cache outside the repo for
// the end-to-end tests of timestamped checkpoints (controller --tsa).
package tools

import _ "github.com/sigstore/timestamp-authority/v2/cmd/timestamp-server"
