package plugin

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// golden compares got with testdata/name, rewriting it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./plugin -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (-update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// normalise replaces what changes from run to run (session and record
// ids, hashes, times, ages) with fixed words, for golden files.
func normalise(s string) string {
	for _, r := range []struct{ re, with string }{
		{`\b[0-9a-f]{64}\b`, "HASH"},
		{`\b\d{8}-\d{6}-[0-9a-f]{6}\b`, "RECORD-ID"},
		{`\b\d{8}-\d{6}-[0-9a-z]{5}\b`, "SESSION-ID"},
		{`"id": "[0-9a-z]{6}"`, `"id": "PATCH-ID"`},
		{`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`, "TIME"},
		{`\b\d{2}:\d{2}:\d{2}\b`, "CLOCK"},
		{`\b\d+(\.\d+)?(ms|s|m)\b`, "AGE"},
	} {
		s = regexp.MustCompile(r.re).ReplaceAllString(s, r.with)
	}
	return s
}

// runPlugin drives the root command the way main does and returns the exit
// code with both streams.
func runPlugin(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := NewCmdRoot(testFactory(t, streams))
	cmd.SetArgs(args)
	code = Execute(context.Background(), cmd, streams)
	return code, out.String(), errOut.String()
}

// runGolden runs the plugin, wants its exit code, and compares stdout and
// stderr (normalised) with testdata/name.
func runGolden(t *testing.T, name string, want int, args ...string) {
	t.Helper()
	code, out, errOut := runPlugin(t, args...)
	if code != want {
		t.Fatalf("kubectl gitops %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out, errOut)
	}
	golden(t, name, normalise("$ kubectl gitops "+strings.Join(args, " ")+"\n--- stdout\n"+out+"--- stderr\n"+errOut))
}
