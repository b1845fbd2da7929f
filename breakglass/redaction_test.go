package breakglass

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/internal/jsontest"
)

var deployment = audit.Target{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "demo", Name: "web"}

func TestRedactPatchAgainstTheLiveObject(t *testing.T) {
	live := jsontest.Decode(t, `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"DB_PASSWORD","value":"old-secret-1"}]}]}}}}`)
	body := []byte(`[{"op":"replace","path":"/spec/template/spec/containers/0/env/0/value","value":"canary-by-index"}]`)
	red, err := redactPatch(deployment, "json", body, live)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(red.body, "canary") {
		t.Errorf("redacted body kept the value: %s", red.body)
	}
	patched := jsontest.Decode(t, `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"DB_PASSWORD","value":"canary-by-index"}]}]}}}}`)
	changes := red.changes(deployment, audit.Diff(live, patched), live, patched)
	out, _ := json.Marshal(changes)
	if strings.Contains(string(out), "canary") || strings.Contains(string(out), "old-secret-1") {
		t.Errorf("changes kept a value: %s", out)
	}
	if got := red.redactor.Text(`Invalid value: "canary-by-index"`); strings.Contains(got, "canary") {
		t.Errorf("a server error echoing the value: %s", got)
	}
	fields := patchedFields(deployment, audit.Diff(live, patched), live, patched)
	if len(fields) != 1 || !fields[0].Secret || fields[0].After != "" {
		t.Errorf("session fields of a secret change: %+v", fields)
	}
}

// TestArgsAfterASecretFlagInThePatchedObject: the flag may only exist
// after the patch, as when the patch sets all the args.
func TestArgsAfterASecretFlagInThePatchedObject(t *testing.T) {
	live := jsontest.Decode(t, `{"spec":{"template":{"spec":{"containers":[{"name":"web","args":["--v=2","--verbose"]}]}}}}`)
	patched := jsontest.Decode(t, `{"spec":{"template":{"spec":{"containers":[{"name":"web","args":["--v=2","--db-password","hunter2xyz"]}]}}}}`)
	red, err := redactPatch(deployment, "strategic", []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"web","args":["--v=2","--db-password","hunter2xyz"]}]}}}}`), live, patched)
	if err != nil {
		t.Fatal(err)
	}
	changes, _ := json.Marshal(red.changes(deployment, audit.Diff(live, patched), live, patched))
	fields := patchedFields(deployment, audit.Diff(live, patched), live, patched)
	if strings.Contains(string(changes), "hunter2xyz") || strings.Contains(red.body, "hunter2xyz") {
		t.Errorf("the argument leaked: %s %s", changes, red.body)
	}
	for _, f := range fields {
		if f.Path == "/spec/template/spec/containers/web/args/1" && !f.Secret {
			t.Errorf("a digest of the argument after --db-password: %+v", f)
		}
	}
	// A secret before the patch keeps no digest either.
	gone := patchedFields(deployment, audit.Diff(patched, live), patched, live)
	for _, f := range gone {
		if f.Path == "/spec/template/spec/containers/web/args/2" && !f.Secret {
			t.Errorf("a digest of the removed argument: %+v", f)
		}
	}
}

// TestACustomResourceKeepsNoValues: the kind, threaded from the target,
// decides; a custom resource's spec.encryption.key and replicas are both
// recorded by structure, while the same Deployment fields keep the image.
func TestACustomResourceKeepsNoValues(t *testing.T) {
	store := audit.Target{Group: "example.com", Version: "v1", Kind: "Store", Namespace: "demo", Name: "orders"}
	live := jsontest.Decode(t, `{"spec":{"replicas":1,"encryption":{"key":"old-key-canary"}}}`)
	patched := jsontest.Decode(t, `{"spec":{"replicas":3,"encryption":{"key":"new-key-canary"}}}`)
	red, err := redactPatch(store, "merge", []byte(`{"spec":{"replicas":3,"encryption":{"key":"new-key-canary"}}}`), live, patched)
	if err != nil {
		t.Fatal(err)
	}
	changes, _ := json.Marshal(red.changes(store, audit.Diff(live, patched), live, patched))
	if strings.Contains(red.body, "canary") || strings.Contains(string(changes), "canary") || strings.Contains(red.body, "3") {
		t.Errorf("a custom resource's values were kept: %s %s", red.body, changes)
	}
	for _, f := range patchedFields(store, audit.Diff(live, patched), live, patched) {
		if !f.Secret {
			t.Errorf("a digest of a custom resource's value: %+v", f)
		}
	}
}

// TestARedactedErrorKeepsItsChain: the patch's error is redacted before it
// reaches the record and the screen, and stays what it was to errors.Is
// and errors.As, so that a conflict still maps to its hint and exit code.
func TestARedactedErrorKeepsItsChain(t *testing.T) {
	live := jsontest.Decode(t, `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"DB_PASSWORD","value":"old-secret-1"}]}]}}}}`)
	red, err := redactPatch(deployment, "json", []byte(`[{"op":"replace","path":"/spec/template/spec/containers/0/env/0/value","value":"canary-by-index"}]`), live)
	if err != nil {
		t.Fatal(err)
	}
	p := &Plan{redaction: red}
	server := apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New(`Invalid value: "canary-by-index"`))
	got := p.RedactErr(fmt.Errorf("patching: %w", server))
	if strings.Contains(got.Error(), "canary") {
		t.Errorf("the error kept the value: %s", got)
	}
	if !apierrors.IsConflict(got) {
		t.Errorf("%v is no longer a conflict", got)
	}
	if p.RedactErr(nil) != nil {
		t.Error("no error redacted is an error")
	}
}
