package breakglass

import "testing"

func TestWithResourceVersion(t *testing.T) {
	for _, tc := range []struct{ typ, body, want string }{
		{"strategic", `{"spec":{"replicas":3}}`, `{"metadata":{"resourceVersion":"42"},"spec":{"replicas":3}}`},
		{"merge", `{"metadata":{"labels":{"a":"b"}}}`, `{"metadata":{"labels":{"a":"b"},"resourceVersion":"42"}}`},
		{"json", `[{"op":"replace","path":"/spec/replicas","value":3}]`, `[{"op":"replace","path":"/metadata/resourceVersion","value":"42"},{"op":"replace","path":"/spec/replicas","value":3}]`},
	} {
		got, err := withResourceVersion(tc.typ, []byte(tc.body), "42")
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %s, %v; want %s", tc.typ, got, err, tc.want)
		}
	}
}
