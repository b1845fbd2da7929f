package audit

import (
	"reflect"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/internal/jsontest"
)

func TestDiffNamesPathsByListItemName(t *testing.T) {
	before := jsontest.Decode(t, `{"metadata":{"resourceVersion":"1","annotations":{"a/b":"x"}},"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"side","image":"s:1"},{"name":"web","image":"w:1","env":[{"name":"MODE","value":"a"}]}]}}},"status":{"ready":1}}`)
	after := jsontest.Decode(t, `{"metadata":{"resourceVersion":"2","annotations":{"a/b":"y"}},"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"web","image":"w:2","env":[{"name":"MODE","value":"a"}]},{"name":"side","image":"s:1"}]}}},"status":{"ready":3}}`)
	got := Diff(before, after)
	want := []Change{
		{Path: "/metadata/annotations/a~1b", Before: "x", After: "y"},
		{Path: "/spec/replicas", Before: 2.0, After: 3.0},
		{Path: "/spec/template/spec/containers/web/image", Before: "w:1", After: "w:2"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Diff:\n got %+v\nwant %+v", got, want)
	}
	if len(Diff(before, before)) != 0 {
		t.Errorf("an object differs from itself")
	}
}

func TestLookupFollowsDiffPaths(t *testing.T) {
	obj := jsontest.Decode(t, `{"metadata":{"annotations":{"a/b":"x"}},"spec":{"ports":[80,443],"template":{"spec":{"containers":[{"name":"web","image":"w:2"}]}}}}`)
	for path, want := range map[string]any{
		"/spec/template/spec/containers/web/image": "w:2",
		"/metadata/annotations/a~1b":               "x",
		"/spec/ports/1":                            443.0,
	} {
		if got, ok := Lookup(obj, path); !ok || got != want {
			t.Errorf("lookup %s = %v %v, want %v", path, got, ok, want)
		}
	}
	for _, path := range []string{"/spec/template/spec/containers/other/image", "/spec/ports/9", "/nope"} {
		if _, ok := Lookup(obj, path); ok {
			t.Errorf("lookup %s found something", path)
		}
	}
}
