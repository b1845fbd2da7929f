package proposal

import (
	"errors"
	"strings"
	"testing"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

var web = audit.Target{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "demo", Name: "web"}

const deployment = `# the web tier
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web   # keep this name
  namespace: demo
spec:
  replicas: 2 # scaled by hand in incidents
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: "registry.example/web:1.0.0"
        env:
        - name: MODE
          value: 'safe'
      - name: proxy
        image: envoy:1
`

func TestEditFiles(t *testing.T) {
	configMap := "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\ndata:\n  greeting: hello\n"
	for name, tc := range map[string]struct {
		files []File
		edits []Edit
		want  string // the edited file
		err   string
	}{
		"replicas, comment kept": {
			files: []File{{"d.yaml", []byte(deployment)}},
			edits: []Edit{{Target: web, Path: "/spec/replicas", Value: 5}},
			want:  strings.Replace(deployment, "replicas: 2 #", "replicas: 5 #", 1),
		},
		"image of a named container, double quotes kept": {
			files: []File{{"d.yaml", []byte(deployment)}},
			edits: []Edit{{Target: web, Path: "/spec/template/spec/containers/web/image", Value: "registry.example/web:hotfix"}},
			want:  strings.Replace(deployment, `"registry.example/web:1.0.0"`, `"registry.example/web:hotfix"`, 1),
		},
		"the second named item, plain": {
			files: []File{{"d.yaml", []byte(deployment)}},
			edits: []Edit{{Target: web, Path: "/spec/template/spec/containers/proxy/image", Value: "envoy:2"}},
			want:  strings.Replace(deployment, "envoy:1", "envoy:2", 1),
		},
		"nested named list, single quotes kept": {
			files: []File{{"d.yaml", []byte(deployment)}},
			edits: []Edit{{Target: web, Path: "/spec/template/spec/containers/web/env/MODE/value", Value: "it's degraded"}},
			want:  strings.Replace(deployment, `'safe'`, `'it''s degraded'`, 1),
		},
		"two edits in one file": {
			files: []File{{"d.yaml", []byte(deployment)}},
			edits: []Edit{{Target: web, Path: "/spec/replicas", Value: 3}, {Target: web, Path: "/spec/template/spec/containers/proxy/image", Value: "envoy:2"}},
			want:  strings.Replace(strings.Replace(deployment, "replicas: 2", "replicas: 3", 1), "envoy:1", "envoy:2", 1),
		},
		"a key Git never set is added at the end of its object": {
			files: []File{{"d.yaml", []byte(deployment)}},
			edits: []Edit{{Target: web, Path: "/spec/template/spec/containers/proxy/resources/limits/memory", Value: "256Mi"}},
			want:  deployment + "        resources:\n          limits:\n            memory: 256Mi\n",
		},
		"a key added inside, before the next key": {
			files: []File{{"d.yaml", []byte(deployment)}},
			edits: []Edit{{Target: web, Path: "/spec/minReadySeconds", Value: 10}},
			want:  strings.Replace(deployment, "        - name: MODE\n          value: 'safe'\n      - name: proxy\n        image: envoy:1\n", "        - name: MODE\n          value: 'safe'\n      - name: proxy\n        image: envoy:1\n  minReadySeconds: 10\n", 1),
		},
		"a field removed live is removed": {
			files: []File{{"d.yaml", []byte(deployment)}},
			edits: []Edit{{Target: web, Path: "/spec/template/spec/containers/web/env/MODE/value", Delete: true}},
			want:  strings.Replace(deployment, "          value: 'safe'\n", "", 1),
		},
		"multi-document file, second document": {
			files: []File{{"all.yaml", []byte(deployment + configMap)}},
			edits: []Edit{{Target: audit.Target{Version: "v1", Kind: "ConfigMap", Namespace: "demo", Name: "web-config"}, Path: "/data/greeting", Value: "bonjour"}},
			want:  deployment + strings.Replace(configMap, "hello", "bonjour", 1),
		},
		"a value reached through an alias is refused": {
			files: []File{{"d.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: demo\nbase: &b\n  x: 1\ndata: *b\n")}},
			edits: []Edit{{Target: audit.Target{Kind: "ConfigMap", Namespace: "demo", Name: "c"}, Path: "/data/x", Value: "2"}},
			err:   "through the alias *b",
		},
		"an anchored value is edited where it is written": {
			files: []File{{"d.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: demo\ndata:\n  x: &v one\n")}},
			edits: []Edit{{Target: audit.Target{Kind: "ConfigMap", Namespace: "demo", Name: "c"}, Path: "/data/x", Value: "two"}},
			err:   "not written plainly",
		},
		"a list item Git does not have": {
			files: []File{{"d.yaml", []byte(deployment)}},
			edits: []Edit{{Target: web, Path: "/spec/template/spec/containers/sidecar/image", Value: "x"}},
			err:   `Git has no list item named "sidecar"`,
		},
		"a target in no file": {
			files: []File{{"c.yaml", []byte(configMap)}},
			edits: []Edit{{Target: web, Path: "/spec/replicas", Value: 1}},
			err:   "no manifest in the source defines deployment.apps/web",
		},
		"a target in two files": {
			files: []File{{"a.yaml", []byte(deployment)}, {"b.yaml", []byte(deployment)}},
			edits: []Edit{{Target: web, Path: "/spec/replicas", Value: 1}},
			err:   "defined in a.yaml and b.yaml",
		},
		"a whole list": {
			files: []File{{"d.yaml", []byte(deployment)}},
			edits: []Edit{{Target: web, Path: "/spec/template/spec/containers/web/env", Value: []any{}}},
			err:   "only single values are edited in place",
		},
		"a block scalar": {
			files: []File{{"d.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: demo\ndata:\n  conf: |\n    a=1\n")}},
			edits: []Edit{{Target: audit.Target{Kind: "ConfigMap", Namespace: "demo", Name: "c"}, Path: "/data/conf", Value: "a=2\n"}},
			err:   "block scalar",
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := EditFiles(tc.files, "demo", tc.edits)
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrCannotPropose) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || string(got[0].Data) != tc.want {
				t.Fatalf("edited:\n%s\nwant:\n%s", got[0].Data, tc.want)
			}
			// What Argo CD reads from the edited file is the original with
			// the edits and nothing else.
			before, _ := Documents(tc.files)
			after, err := Documents(got)
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range after {
				want := before[i].Object
				if d.Matches(tc.edits[0].Target, "demo") {
					if want, err = Apply(want, tc.edits); err != nil {
						t.Fatal(err)
					}
				}
				if !Same(d.Object, want) {
					t.Errorf("document %d reads %v, want %v", i, d.Object, want)
				}
			}
		})
	}
}
