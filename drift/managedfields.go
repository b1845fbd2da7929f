package drift

import (
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/kubectl-gitops/kubectl-gitops/redact"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FieldWriter is the manager that owns path in live's managedFields, the
// latest when several do, with when it wrote; "" when none does.
func FieldWriter(live *unstructured.Unstructured, path string) (string, *time.Time) {
	if live == nil {
		return "", nil
	}
	segs := redact.Segments(path)
	var manager string
	var since *time.Time
	for _, mf := range live.GetManagedFields() {
		if mf.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(mf.FieldsV1.Raw, &fields) != nil || !owns(fields, segs) {
			continue
		}
		if at := mf.Time; manager == "" || at != nil && (since == nil || at.After(*since)) {
			manager = mf.Manager
			if at != nil {
				t := at.Time
				since = &t
			}
		}
	}
	return manager, since
}

// owns is whether a fieldsV1 set covers the field at segs: each segment a
// field (f:NAME) or a list item keyed by name (k:{"name":…}); a set that
// stops early owns the whole value below (an atomic field).
func owns(fields map[string]any, segs []string) bool {
	node := fields
	for _, seg := range segs {
		if next, ok := node["f:"+seg].(map[string]any); ok {
			node = next
			continue
		}
		next := itemKeyed(node, seg)
		if next == nil {
			return len(node) == 0
		}
		node = next
	}
	return true
}

// itemKeyed is the fieldsV1 child for the list item named name.
func itemKeyed(node map[string]any, name string) map[string]any {
	for k, v := range node {
		if !strings.HasPrefix(k, "k:") {
			continue
		}
		var key map[string]any
		if json.Unmarshal([]byte(k[2:]), &key) == nil && key["name"] == name {
			child, _ := v.(map[string]any)
			return child
		}
	}
	return nil
}

// lastWriter is the manager that wrote live last, other than Argo CD.
func lastWriter(live *unstructured.Unstructured) (string, *time.Time) {
	if live == nil {
		return "", nil
	}
	entries := live.GetManagedFields()
	sort.SliceStable(entries, func(i, j int) bool {
		return entries[i].Time != nil && (entries[j].Time == nil || entries[i].Time.After(entries[j].Time.Time))
	})
	for _, mf := range entries {
		if ClassOf(DefaultManagerClasses, mf.Manager) != ArgoCD {
			var since *time.Time
			if mf.Time != nil {
				t := mf.Time.Time
				since = &t
			}
			return mf.Manager, since
		}
	}
	return "", nil
}

// throughKeyedItem is whether path goes through a list item that Diff
// names (a segment that is not a field of the item's list): Kubernetes
// may key such items by other fields (mountPath, port), which managedFields
// then use instead of the name.
func throughKeyedItem(path string) bool {
	for _, seg := range []string{"/volumeMounts/", "/volumeDevices/", "/ports/", "/hostAliases/", "/topologySpreadConstraints/"} {
		if strings.Contains(path, seg) {
			return true
		}
	}
	return false
}
