package audit

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestOpenExportTellsAnotherFileFromTampering: a JSON array, a CSV
// export, random bytes or one endless line is not an export, said once
// (ErrNotExport), where each of its lines read as an altered record; an
// export, an empty file, and an export whose first line was altered open.
func TestOpenExportTellsAnotherFileFromTampering(t *testing.T) {
	entries := chain(t, 4)
	var export, array bytes.Buffer
	if err := WriteJSONL(&export, entries); err != nil {
		t.Fatal(err)
	}
	docs := make([]json.RawMessage, len(entries))
	for i, e := range entries {
		docs[i] = e.Doc
	}
	js, _ := json.MarshalIndent(docs, "", "  ")
	array.Write(js)
	random := make([]byte, 64<<10)
	if _, err := rand.Read(random); err != nil {
		t.Fatal(err)
	}
	altered := "{not json\n" + strings.SplitN(export.String(), "\n", 2)[1]
	dir := t.TempDir()
	for _, tt := range []struct {
		name, content string
		export        bool
	}{
		{"export", export.String(), true},
		{"empty", "", true},
		{"first line altered", altered, true},
		{"json array", array.String(), false},
		{"csv", "TIME,EVENT,SESSION\n2026-12-07T03:15:00Z,breakglass.planned,s-1\n", false},
		{"random bytes", string(random), false},
		{"one endless line", strings.Repeat("0", maxLine+1), false},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
		if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := OpenExport(path)
		if tt.export && err != nil || !tt.export && !errors.Is(err, ErrNotExport) {
			t.Errorf("%s: %v; want export %v", tt.name, err, tt.export)
		}
		if !tt.export && err != nil && !strings.Contains(err.Error(), "audit log -o jsonl") {
			t.Errorf("%s: %v does not say how an export is made", tt.name, err)
		}
	}
}

// TestAnExportTellsWhatTheClusterTells: a record deleted from an export is
// one missing record, as it is from the cluster's log, not every record
// after it reordered (the line number was the position); a record altered
// in place is altered at its own position; lines moved about but intact
// are the same chain.
func TestAnExportTellsWhatTheClusterTells(t *testing.T) {
	entries := chain(t, 8)
	lines := func(es []Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, string(e.Doc))
		}
		return out
	}
	verifyFile := func(t *testing.T, lines []string) Report {
		path := filepath.Join(t.TempDir(), "export.jsonl")
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := OpenExport(path)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := VerifyStore(context.Background(), s, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	kinds := func(bs []Break) (out []string) {
		for _, b := range bs {
			out = append(out, string(b.Kind)+"@"+string(rune('0'+b.Seq)))
		}
		return out
	}
	deleted := append(append([]Entry(nil), entries[:2]...), entries[3:]...)
	cluster := Verify(deleted, nil)
	file := verifyFile(t, lines(deleted))
	if want := []string{"missing@3"}; !reflect.DeepEqual(kinds(cluster.Breaks), want) || !reflect.DeepEqual(kinds(file.Breaks), want) {
		t.Errorf("a deleted record: cluster %v, export %v; want %v both", cluster.Breaks, file.Breaks, want)
	}
	l := lines(entries)
	l[4] = strings.Replace(l[4], "incident step", "nothing to see", 1)
	if got := kinds(verifyFile(t, l).Breaks); !reflect.DeepEqual(got, []string{"altered@5"}) {
		t.Errorf("a record altered in place: %v, want altered@5", got)
	}
	l = lines(entries)
	l[2], l[3] = l[3], l[2]
	if rep := verifyFile(t, l); !rep.Intact() || rep.Records != 8 {
		t.Errorf("two lines swapped: %+v, want the same intact chain", rep)
	}
	l = lines(entries)
	l = append(l[:5:5], append([]string{l[4]}, l[5:]...)...)
	if rep := verifyFile(t, l); rep.Intact() {
		t.Errorf("a record copied twice verified intact")
	}
}
