package audit

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestPrefetchAnswersAsTheNarrowedListingWould: after one read for many
// sessions and applications, each one's Entries are exactly what the
// store's own narrowed listing gives (a record relabelled to another
// session included), without listing again; what was not read is listed.
func TestPrefetchAnswersAsTheNarrowedListingWould(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	store := NewConfigMapStore(client, "argocd")
	for i, s := range []string{"s1", "s2", "s1", "s3", "s2", "other"} {
		r := &Record{Event: EventPlanned, Session: s, Application: &AppRef{Namespace: "argocd", Name: fmt.Sprintf("app-%d", i%3)}, Actor: Actor{Username: "oncall"}}
		if err := store.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// A record whose session label names s1 while its body names s3.
	relabelled, err := client.CoreV1().ConfigMaps("argocd").Get(ctx, RecordName(4), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	relabelled.Labels[LabelSession] = "s1"
	if _, err := client.CoreV1().ConfigMaps("argocd").Update(ctx, relabelled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sessions, apps := []string{"s1", "s2", "s3", "none", "not a label value"}, []string{"app-0", "app-1", "app-9"}
	client.ClearActions()
	view, err := Prefetch(ctx, store, sessions, apps)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(client.Actions()); n != 2 {
		t.Fatalf("prefetch sent %d requests, want one listing for the sessions and one for the applications", n)
	}
	client.ClearActions()
	var filters []Filter
	for _, s := range sessions[:4] {
		filters = append(filters, Filter{Session: s})
	}
	for _, a := range apps {
		filters = append(filters, Filter{App: a})
	}
	for _, f := range filters {
		got, err := view.Entries(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(client.Actions()); n != 0 {
			t.Errorf("%+v: listed again (%d requests)", f, n)
		}
		want, _ := store.Entries(ctx, f)
		client.ClearActions()
		if !reflect.DeepEqual(names(got), names(want)) {
			t.Errorf("%+v: prefetched %v, the store lists %v", f, names(got), names(want))
		}
	}
	// Not read: listed as before.
	for _, f := range []Filter{{Session: "other"}, {Session: "not a label value"}, {App: "app-2"}, {Event: EventPlanned}, {Session: "s1", App: "app-0"}} {
		client.ClearActions()
		if _, err := view.Entries(ctx, f); err != nil || len(client.Actions()) == 0 {
			t.Errorf("%+v: %v, %d requests; want it listed by the store", f, err, len(client.Actions()))
		}
	}
}

// TestPrefetchLeavesOtherStoresAlone: a store that cannot list by many
// values is used as it is.
func TestPrefetchLeavesOtherStoresAlone(t *testing.T) {
	file := &FileStore{Path: t.TempDir() + "/audit.jsonl"}
	view, err := Prefetch(context.Background(), file, []string{"s1"}, []string{"web"})
	if err != nil || view != Store(file) {
		t.Errorf("Prefetch of a file store: %v, %T; want the store itself", err, view)
	}
}

func names(entries []Entry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Name)
	}
	return out
}

// TestChunksKeepSelectorsShort: values are split so that each listing's
// values add up to at most the size, a longer value going alone.
func TestChunksKeepSelectorsShort(t *testing.T) {
	got := chunks([]string{"aaaa", "bb", "c", "dddddddddd", "e"}, 8)
	want := [][]string{{"aaaa", "bb"}, {"c"}, {"dddddddddd"}, {"e"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("chunks: %q, want %q", got, want)
	}
	if got := chunks(nil, 8); len(got) != 0 {
		t.Errorf("chunks of nothing: %q", got)
	}
}
