package breakglass

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/redact"
)

// Size limits that keep a break-glass storable: the session annotation
// shares the Application's 256 KiB of annotations with everything else, and
// a record is one ConfigMap (1 MiB of data).
const (
	MaxSessionBytes = 64 << 10
	MaxRecordBytes  = 900 << 10
)

// patchRedaction is the patch as it may be stored and shown.
type patchRedaction struct {
	body     string
	redactor *redact.Redactor
}

// redactPatch redacts a patch body against the live object it applies to,
// learning the secret values so that later text (a server's error) can be
// cleaned of them too.
func redactPatch(t audit.Target, patchType string, body []byte, objs ...map[string]any) (*patchRedaction, error) {
	out, err := redact.Patch(body, t.IsSecret(), objs...)
	if err != nil {
		return nil, fmt.Errorf("the %s patch: %v", patchType, err)
	}
	var original, redacted any
	_ = json.Unmarshal(body, &original)
	_ = json.Unmarshal([]byte(out), &redacted)
	r := &redact.Redactor{}
	r.Learn(original, redacted)
	return &patchRedaction{body: out, redactor: r}, nil
}

// afterSecretFlag is whether path is an argument right after a
// secret-looking --flag in any of objs.
func afterSecretFlag(path string, objs []map[string]any) bool {
	for _, obj := range objs {
		if _, afterFlag := redact.Resolve(obj, path); afterFlag {
			return true
		}
	}
	return false
}

// changes redacts the changed fields by the field each path resolves to in
// objs (before and after the patch); the secret values found are learnt too.
func (pr *patchRedaction) changes(t audit.Target, changes []audit.Change, objs ...map[string]any) []audit.Change {
	out := make([]audit.Change, len(changes))
	for i, c := range changes {
		before, after := redact.Change(c.Path, c.Before, c.After)
		if t.IsSecret() || afterSecretFlag(c.Path, objs) {
			before, after = redact.All(c.Before), redact.All(c.After)
		}
		pr.redactor.Learn(c.Before, before)
		pr.redactor.Learn(c.After, after)
		out[i] = audit.Change{Path: c.Path, Before: before, After: after}
	}
	return out
}

// patchedFields are the session's view of the changes: paths and digests.
// A field whose value before or after holds anything secret keeps none.
func patchedFields(t audit.Target, changes []audit.Change, objs ...map[string]any) []PatchedField {
	out := make([]PatchedField, len(changes))
	for i, c := range changes {
		if t.IsSecret() || afterSecretFlag(c.Path, objs) || redact.Path(c.Path) ||
			!equalJSON(redact.At(c.Path, c.After), c.After) || !equalJSON(redact.At(c.Path, c.Before), c.Before) {
			out[i] = PatchedField{Path: c.Path, Secret: true}
			continue
		}
		out[i] = PatchedField{Path: c.Path, Before: digest(c.Before), After: digest(c.After)}
	}
	return out
}

// digest is the SHA-256 of v's canonical JSON (keys sorted, numbers as
// float64 as any JSON reader sees them); an absent field digests as null.
func digest(v any) string {
	b, _ := json.Marshal(v)
	var n any
	_ = json.Unmarshal(b, &n)
	b, _ = json.Marshal(n)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// rawPatch is the patch exactly as the user gave it (the --patch text or
// the --patch-file bytes), or the JSON built from the --image/--replicas
// shortcuts: what the record's keyed digest covers.
func rawPatch(spec PatchSpec, built []byte) []byte {
	if spec.Body != "" {
		return []byte(spec.Body)
	}
	return built
}

// Redact cleans text of this plan's secret values and of anything
// credential-shaped, for errors and warnings that may echo the patch.
func (p *Plan) Redact(s string) string {
	if p.redaction == nil {
		return redact.Text(s)
	}
	return p.redaction.redactor.Text(s)
}

// checkSize refuses, before any change, a patch whose session or audit
// record could not be stored.
func (p *Plan) checkSize() error {
	session := Session{Patches: []SessionPatch{{Target: p.Target, Type: p.PatchType, Fields: p.fields}}}
	if p.Join != nil {
		session = *p.Join
		session.Patches = append(append([]SessionPatch(nil), p.Join.Patches...), SessionPatch{Target: p.Target, Type: p.PatchType, Fields: p.fields})
	}
	if b, _ := json.Marshal(session); len(b) > MaxSessionBytes {
		return fmt.Errorf("%w: the patch changes %d fields, too many to track in the session annotation (%d KiB, limit %d KiB): patch fewer fields at once", ErrPatchInvalid, len(p.fields), len(b)>>10, MaxSessionBytes>>10)
	}
	r := audit.Record{Reason: p.Request.Reason, Incident: p.Request.Incident, Target: &p.Target,
		Patch:   p.RecordedPatch(),
		Changes: p.Changes, SyncPolicy: &audit.SyncPolicy{Before: p.SyncPolicyBefore, After: p.SyncPolicyAfter}}
	if b, _ := json.Marshal(r); len(b) > MaxRecordBytes {
		return fmt.Errorf("%w: the patch is too large to record: its audit record would be %d KiB, over the %d KiB a record ConfigMap holds; patch less at once", ErrPatchInvalid, len(b)>>10, MaxRecordBytes>>10)
	}
	return nil
}

// podSpecPaths are where workloads keep their pod template's spec.
var podSpecPaths = [][]string{{"spec", "template", "spec"}, {"spec", "jobTemplate", "spec", "template", "spec"}}

// imagePatch builds the strategic merge patch of the --image (and
// --replicas) shortcuts for live, refusing a container name the workload
// does not have: a strategic merge by name would add a new container.
func (p PatchSpec) imagePatch(t audit.Target, live map[string]any) ([]byte, error) {
	path := []string{"spec"}
	if t.Kind != "Pod" {
		path = nil
		for _, candidate := range podSpecPaths {
			if _, ok, _ := unstructured.NestedMap(live, candidate...); ok {
				path = candidate
				break
			}
		}
		if path == nil {
			return nil, inputError(InputImage, "", "%s has no pod template, so no container image can be set there: give a patch instead", t)
		}
	}
	kinds := map[string]string{}
	var names []string
	for _, list := range []string{"initContainers", "containers"} {
		items, _, _ := unstructured.NestedSlice(live, append(append([]string(nil), path...), list)...)
		for _, item := range items {
			if m, ok := item.(map[string]any); ok {
				if name, ok := m["name"].(string); ok {
					kinds[name] = list
					label := name
					if list == "initContainers" {
						label += " (init)"
					}
					names = append(names, label)
				}
			}
		}
	}
	lists := map[string][]any{}
	var unknown []string
	for _, name := range sortedKeys(p.Images) {
		list, ok := kinds[name]
		if !ok {
			unknown = append(unknown, name)
			continue
		}
		lists[list] = append(lists[list], map[string]any{"name": name, "image": p.Images[name]})
	}
	if len(unknown) > 0 {
		return nil, inputError(InputImage, "", "names container %s, which %s does not have (it has %s)", strings.Join(unknown, ", "), t, strings.Join(names, ", "))
	}
	podSpec := map[string]any{}
	for list, items := range lists {
		podSpec[list] = items
	}
	patch := map[string]any{}
	if err := unstructured.SetNestedField(patch, podSpec, path...); err != nil {
		return nil, err
	}
	if p.Replicas != nil {
		if err := unstructured.SetNestedField(patch, int64(*p.Replicas), "spec", "replicas"); err != nil {
			return nil, err
		}
	}
	return json.Marshal(patch)
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// RecordedPatch is the patch as its records keep it.
func (p *Plan) RecordedPatch() *audit.Patch {
	return &audit.Patch{Type: p.PatchType, Body: p.PatchRedacted, HMAC: p.PatchHMAC, KeyID: p.PatchKeyID}
}
