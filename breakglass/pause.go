package breakglass

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// pausedPolicy is the sync policy with automated sync off. With disable
// (Argo CD ≥ 3.1, whose schema has automated.enabled), automated stays and
// gets enabled: false, so prune and selfHeal remain visible; otherwise
// automated is removed, which every version honours. Everything else
// (syncOptions, retry) stays.
func pausedPolicy(policy any, disable bool) any {
	m, ok := policy.(map[string]any)
	if !ok {
		return policy
	}
	paused := map[string]any{}
	for k, v := range m {
		if k != "automated" {
			paused[k] = v
		}
	}
	if automated, ok := m["automated"].(map[string]any); ok && disable {
		off := map[string]any{}
		for k, v := range automated {
			off[k] = v
		}
		off["enabled"] = false
		paused["automated"] = off
	}
	return paused
}

// syncsAutomatically is whether app's policy has automated sync on:
// automated is set and not enabled: false.
func syncsAutomatically(app *unstructured.Unstructured) bool {
	automated, ok, _ := unstructured.NestedMap(app.Object, "spec", "syncPolicy", "automated")
	if !ok {
		return false
	}
	enabled, set := automated["enabled"].(bool)
	return !set || enabled
}

// AutomatedSchema reads the Application schema the API server publishes
// (OpenAPI v3, readable by every authenticated user) and reports whether
// it has spec.syncPolicy.automated and, within it, enabled (Argo CD ≥ 3.1).
func (e *Engine) AutomatedSchema() (found, enabled bool, err error) {
	paths, err := e.Kube.Discovery().OpenAPIV3().Paths()
	if err != nil {
		return false, false, fmt.Errorf("reading the API server's OpenAPI v3 paths: %w", err)
	}
	gv, ok := paths["apis/"+ApplicationGVR.Group+"/"+ApplicationGVR.Version]
	if !ok {
		return false, false, fmt.Errorf("the API server publishes no OpenAPI schema for %s/%s", ApplicationGVR.Group, ApplicationGVR.Version)
	}
	doc, err := gv.Schema("application/json")
	if err != nil {
		return false, false, fmt.Errorf("reading the OpenAPI schema of %s: %w", ApplicationGVR.Group, err)
	}
	found, enabled = automatedInSchema(doc)
	return found, enabled, nil
}

// automatedInSchema walks an OpenAPI v3 document to the Application's
// spec.syncPolicy.automated properties.
func automatedInSchema(doc []byte) (found, enabled bool) {
	type schema struct {
		Properties map[string]*schema `json:"properties"`
	}
	var d struct {
		Components struct {
			Schemas map[string]*schema `json:"schemas"`
		} `json:"components"`
	}
	if json.Unmarshal(doc, &d) != nil {
		return false, false
	}
	for name, s := range d.Components.Schemas {
		if !strings.HasSuffix(name, ".argoproj.v1alpha1.Application") {
			continue
		}
		for _, p := range []string{"spec", "syncPolicy", "automated"} {
			if s == nil || s.Properties[p] == nil {
				return false, false
			}
			s = s.Properties[p]
		}
		_, enabled = s.Properties["enabled"]
		return true, enabled
	}
	return false, false
}
