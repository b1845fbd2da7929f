package plugin

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// mirrorFlags are where the audit log's mirror is (docs/audit.md, The mirror).
// Credentials are never a flag: the S3 SDK reads them from the
// environment, the shared files or the pod's web identity.
type mirrorFlags struct {
	URL, Endpoint, Region string
}

func (f *mirrorFlags) add(cmd *cobra.Command, usage string) {
	cmd.Flags().StringVar(&f.URL, "mirror", "", usage)
	cmd.Flags().StringVar(&f.Endpoint, "mirror-endpoint", "", "the S3 API's URL for an S3-compatible server (MinIO, Ceph, versitygw), whose buckets are then addressed in the path; default: AWS S3 in the region (AWS_ENDPOINT_URL_S3 is honoured too)")
	cmd.Flags().StringVar(&f.Region, "mirror-region", "", "the bucket's region (default: AWS_REGION or the shared config, else us-east-1)")
}

// open connects to the mirror, retention locking each record written.
func (f *mirrorFlags) open(ctx context.Context, retention time.Duration) (*audit.Mirror, error) {
	loc, err := audit.ParseMirrorURL(f.URL)
	if err != nil {
		return nil, usageErrorf("--mirror: %v", err)
	}
	return audit.OpenMirror(ctx, audit.MirrorOptions{Location: loc, Endpoint: f.Endpoint, Region: f.Region, PathStyle: f.Endpoint != "", Retention: retention})
}

// checkpointKeys reads the public keys an auditor passed with
// --checkpoint-key, by key id.
func checkpointKeys(files []string) (map[string]ed25519.PublicKey, error) {
	keys := map[string]ed25519.PublicKey{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, usageErrorf("--checkpoint-key %s: %v", file, err)
		}
		found, err := audit.ParsePublicKeys(data)
		if err != nil {
			return nil, usageErrorf("--checkpoint-key %s: %v", file, err)
		}
		for id, k := range found {
			keys[id] = k
		}
	}
	return keys, nil
}

// tsaTrust reads the timestamp authority's certificates from a PEM file;
// nil for none given.
func tsaTrust(file string) (*audit.TSATrust, error) {
	if file == "" {
		return nil, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, usageErrorf("--tsa-certs %s: %v", file, err)
	}
	trust, err := audit.ParseTSATrust(data)
	if err != nil {
		return nil, usageErrorf("--tsa-certs %s: %v", file, err)
	}
	return trust, nil
}

// printMirror sums up what verify read from the mirror.
func printMirror(o *AuditVerifyOptions, sum *audit.MirrorSummary) {
	compared := "the mirror alone (--mirror-only)"
	if sum.Compared {
		compared = "compared with the cluster's log in namespace " + o.source.Namespace
	}
	fmt.Fprintf(o.Out, "mirror %s: newest record %d, %s\n", sum.Location, sum.Newest, compared)
	switch {
	case sum.Checkpoints == 0:
		fmt.Fprintln(o.Out, "no checkpoints found")
	case len(o.CheckpointKeys) == 0:
		fmt.Fprintf(o.Out, "%d checkpoint(s), unverified: pass the controller's public key with --checkpoint-key\n", sum.Checkpoints)
	default:
		fmt.Fprintf(o.Out, "%d checkpoint(s), %d signed by a key you passed\n", sum.Checkpoints, sum.Verified)
	}
	if sum.Timestamped > 0 {
		fmt.Fprintf(o.Out, "%d checkpoint(s) timestamped by a timestamp authority of --tsa-certs\n", sum.Timestamped)
	}
}
