package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The examples of RFC 8785 §3.2.2, §3.2.3 and Appendix B.
func TestJCSFollowsRFC8785(t *testing.T) {
	canon := func(doc string) string {
		t.Helper()
		dec := json.NewDecoder(strings.NewReader(doc))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := jcs(&buf, v); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	if got, want := canon(in), `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`; got != want {
		t.Errorf("§3.2.2:\n got %s\nwant %s", got, want)
	}
	sorting := `{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`
	var order []string
	for _, part := range strings.Split(canon(sorting), `","`) {
		order = append(order, strings.SplitN(part, `":"`, 2)[1])
	}
	if got, want := strings.Join(order, "|"), "Carriage Return|One|Control|Latin Small Letter O With Diaeresis|Euro Sign|Emoji: Grinning Face|Hebrew Letter Dalet With Dagesh\"}"; got != want {
		t.Errorf("§3.2.3 order:\n got %s\nwant %s", got, want)
	}
	for _, tt := range []struct {
		f    float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "0"}, {5e-324, "5e-324"}, {-5e-324, "-5e-324"},
		{1.7976931348623157e308, "1.7976931348623157e+308"}, {9007199254740992, "9007199254740992"},
		{-9007199254740992, "-9007199254740992"}, {295147905179352830000, "295147905179352830000"},
		{1e21, "1e+21"}, {1e23, "1e+23"}, {999999999999999900000, "999999999999999900000"},
		{0.000001, "0.000001"}, {1e-7, "1e-7"}, {123.456, "123.456"}, {-1.5e-10, "-1.5e-10"}, {3, "3"},
	} {
		if got, err := es6Number(tt.f); err != nil || got != tt.want {
			t.Errorf("es6Number(%v) = %q, %v; want %q", tt.f, got, err, tt.want)
		}
	}
	if _, err := es6Number(math.NaN()); err == nil {
		t.Error("NaN has a JSON form")
	}
	var buf bytes.Buffer
	if err := jcs(&buf, "\xff"); err == nil {
		t.Error("invalid UTF-8 was canonicalised")
	}
}

// TestRecordHashIsSHA256OfItsRFC8785Form: a record written now hashes to
// the SHA-256 of its canonical form as any RFC 8785 implementation writes
// it, here spelt out by hand.
func TestRecordHashIsSHA256OfItsRFC8785Form(t *testing.T) {
	s := &FileStore{Path: filepath.Join(t.TempDir(), "log.jsonl")}
	r := &Record{Event: EventPlanned, Time: time.Date(2026, 12, 3, 3, 10, 0, 0, time.UTC), ID: "20261203-031000-abcdef",
		Actor: Actor{Username: "oncall"}, Reason: "5xx <after> 1.0\u2028é"}
	if err := s.Append(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	want := `{"actor":{"username":"oncall"},"client":{},"event":"breakglass.planned","id":"20261203-031000-abcdef","outcome":{"status":""},"prev":"","reason":"5xx <after> 1.0` + "\u2028" + `é","schema":2,"seq":1,"time":"2026-12-03T03:10:00Z"}`
	sum := sha256.Sum256([]byte(want))
	if r.Schema != 2 || r.Hash != hex.EncodeToString(sum[:]) {
		entries, _ := s.Entries(context.Background(), Filter{})
		c, _ := canonical(entries[0].Doc)
		t.Errorf("schema %d hash %s, want the SHA-256 of\n%s\ncanonical form:\n%s", r.Schema, r.Hash, want, c)
	}
}

// TestSchema1RecordsKeepVerifying: a record written before RFC 8785
// (schema 1: Go's encoding, which escapes U+2028) verifies under its own
// rule, and the same record relabelled schema 2 does not.
func TestSchema1RecordsKeepVerifying(t *testing.T) {
	const v1 = `{"schema":1,"id":"20261101-031000-abcdef","seq":1,"time":"2026-11-01T03:10:00Z","event":"breakglass.planned","actor":{"username":"oncall"},"client":{},"reason":"rollback\u2028line \u003cb\u003e \u0026 4.50","outcome":{"status":""},"prev":"","hash":"1f7225884d6ea2c9f6f423a97da2d55222252c84f244f35f7a43840b164d067c"}`
	if rep := Verify([]Entry{{Slot: 1, Name: "line 1", Doc: []byte(v1)}}, nil); !rep.Intact() {
		t.Errorf("a schema 1 record no longer verifies: %v", rep.Breaks)
	}
	relabelled := strings.Replace(v1, `"schema":1`, `"schema":2`, 1)
	if rep := Verify([]Entry{{Slot: 1, Name: "line 1", Doc: []byte(relabelled)}}, nil); rep.Intact() {
		t.Error("a schema 1 record relabelled schema 2 verifies")
	}
}
