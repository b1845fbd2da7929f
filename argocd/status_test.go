package argocd

import "testing"

func TestAutomatedInSchema(t *testing.T) {
	doc := func(automated string) []byte {
		return []byte(`{"components":{"schemas":{"io.argoproj.v1alpha1.ApplicationList":{},"io.argoproj.v1alpha1.Application":{"properties":{"spec":{"properties":{"syncPolicy":{"properties":{"automated":` + automated + `}}}}}}}}}`)
	}
	for _, tt := range []struct {
		name             string
		doc              []byte
		found, withField bool
	}{
		{"Argo CD 2.x", doc(`{"properties":{"prune":{},"selfHeal":{},"allowEmpty":{}}}`), true, false},
		{"Argo CD 3.1", doc(`{"properties":{"enabled":{},"prune":{},"selfHeal":{}}}`), true, true},
		{"no syncPolicy schema", []byte(`{"components":{"schemas":{"io.argoproj.v1alpha1.Application":{"properties":{"spec":{}}}}}}`), false, false},
		{"not JSON", []byte(`<html>`), false, false},
	} {
		found, enabled := automatedInSchema(tt.doc)
		if found != tt.found || enabled != tt.withField {
			t.Errorf("%s: found %v enabled %v, want %v %v", tt.name, found, enabled, tt.found, tt.withField)
		}
	}
}
