// Package jsontest reads the JSON objects tests write inline. Only tests
// import it.
package jsontest

import (
	"encoding/json"
	"testing"
)

// Decode reads s, a JSON object, failing the test when it is not one.
func Decode(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}
