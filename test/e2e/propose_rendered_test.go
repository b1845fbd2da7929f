//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubectl-gitops/kubectl-gitops/argocd"
	"github.com/kubectl-gitops/kubectl-gitops/audit"
	"github.com/kubectl-gitops/kubectl-gitops/breakglass"
	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// hotfixPatch is an on-call's fix of deployment/web touching the three
// kinds of field a source maps differently: the image, the replicas and a
// field of its own (minReadySeconds, which Git never set).
const hotfixPatch = `{"spec":{"replicas":4,"minReadySeconds":5,"template":{"spec":{"containers":[{"name":"web","image":"registry.example/web:hotfix"}]}}}}`

// hotfixPaths are the paths hotfixPatch changes, as records spell them.
var hotfixPaths = []string{"/spec/minReadySeconds", "/spec/replicas", "/spec/template/spec/containers/web/image"}

// overlayKustomization is an overlay's kustomization as people keep it:
// commented, the image pinned through images:, replicas through replicas:.
const overlayKustomization = `# Production overlay of the web tier. Owned by team web.
resources:
- ../base
images:
# bumped by the release pipeline
- name: registry.example/web
  newTag: 1.0.0 # the release
replicas:
- name: web
  count: 2 # raised during incidents, then brought back
`

// TestProposeKustomizeOverlay: the live fix of an Application that Argo
// CD renders with kustomize goes into the overlay as kustomize edit would
// write it (the image through images:, replicas through replicas:, the
// other field as a patch added to patches:), the kustomization's comments
// kept; Argo CD renders the proposal's commit with exactly the live values
// and nothing else changed; merging it closes the loop with no hand edit.
func TestProposeKustomizeOverlay(t *testing.T) {
	core(t)
	e := environment(t)
	startReplica(t, "replica-kustomize")
	github := startGitHub(t)
	const name = "pr-kustomize"
	files := map[string]string{}
	for p, data := range env.AppFiles("apps/"+name+"/base", name, env.FixtureImage) {
		files[p] = data
	}
	files["apps/"+name+"/base/kustomization.yaml"] = "resources:\n- deployment.yaml\n- configmap.yaml\n"
	files["apps/"+name+"/overlay/kustomization.yaml"] = overlayKustomization
	head := createAppFrom(t, name, files, "apps/"+name+"/overlay", nil)
	waitSynced(t, name, head)

	oncall := newUser(t, env.Oncall.Name, "GITHUB_TOKEN="+githubToken)
	out, errOut := mustRun(t, oncall, 0, "breakglass", name, "deployment/web", "--patch", hotfixPatch,
		"--reason", "5xx after 1.0.0", "--auto-restore", "--propose", "--provider", "github", "--api-url", github.API(), "--project", "acme/deploy", "-y")
	if !strings.Contains(out, "opened PR #4") {
		t.Fatalf("breakglass --propose:\n%s\n%s", out, errOut)
	}
	session := sessionOf(t, name).ID
	branch := breakglass.ProposalBranch(session)
	patchFile := "kubectl-gitops-" + strings.ToLower(session) + "-deployment-web.yaml"

	overlay, err := e.Git.Show(branch, "apps/"+name+"/overlay/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(strings.Replace(overlayKustomization, "newTag: 1.0.0", "newTag: hotfix", 1), "count: 2", "count: 4", 1) +
		"patches:\n  - path: " + patchFile + "\n    target:\n      group: apps\n      kind: Deployment\n      name: web\n"
	if overlay+"\n" != want {
		t.Errorf("the proposed kustomization:\n%s\nwant:\n%s", overlay, want)
	}
	patch, err := e.Git.Show(branch, "apps/"+name+"/overlay/"+patchFile)
	if err != nil || !strings.Contains(patch, "- op: add\n  path: /spec/minReadySeconds\n  value: 5") {
		t.Errorf("the proposed patch %s: %v\n%s", patchFile, err, patch)
	}
	for p, data := range files {
		if strings.Contains(p, "/base/") {
			if got, _ := e.Git.Show(branch, p); got+"\n" != data {
				t.Errorf("%s changed on the branch:\n%s", p, got)
			}
		}
	}
	rendersLive(t, name, head, proposedCommit(t, session))
	mergeAndRestore(t, github, 4, name, session)
	assertLiveFix(t, name)
}

// chartFiles is a Helm chart as people keep one: commented defaults, and
// a production value file that pins the tag (which wins over the default).
func chartFiles(dir string) map[string]string {
	return map[string]string{
		dir + "/Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		dir + "/values.yaml": `# Defaults of the web chart.
replicaCount: 2 # the floor; raised during incidents
image:
  repository: registry.example/web
  tag: "0.9.0"
greeting: hello
`,
		dir + "/values-prod.yaml": `# Production.
image:
  tag: "1.0.0" # the release, bumped by the pipeline
`,
		dir + "/templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: {{ .Release.Namespace }}
spec:
  replicas: {{ .Values.replicaCount }}
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
        image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
        ports:
        - containerPort: 8080
`,
		dir + "/templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
  namespace: {{ .Release.Namespace }}
data:
  greeting: {{ .Values.greeting }}
`,
	}
}

// TestProposeHelmValues: the live fix of an Application that renders a
// Helm chart goes into the value that renders each field, in the file
// that wins for it (the tag in values-prod.yaml, the replicas in
// values.yaml), comments and quotes kept, each proven by rendering the
// chart; a field no value yields (minReadySeconds, which the chart never
// renders) is refused as one to make by hand, and nothing is pushed.
// Argo CD renders the proposal's commit with exactly the live values;
// merging it closes the loop.
func TestProposeHelmValues(t *testing.T) {
	core(t)
	e := environment(t)
	startReplica(t, "replica-helm")
	github := startGitHub(t)
	files := chartFiles("apps/pr-helm/chart")
	for p, data := range chartFiles("apps/pr-helm-refused/chart") {
		files[p] = data
	}
	var head string
	for _, name := range []string{"pr-helm", "pr-helm-refused"} {
		head = createAppFrom(t, name, files, "apps/"+name+"/chart", func(app *unstructured.Unstructured, _ string) {
			if err := unstructured.SetNestedField(app.Object, map[string]any{"valueFiles": []any{"values-prod.yaml"}}, "spec", "source", "helm"); err != nil {
				t.Fatal(err)
			}
		})
	}
	// The first commit holds both charts already: either revision will do.
	for _, name := range []string{"pr-helm", "pr-helm-refused"} {
		waitSynced(t, name, "")
	}
	// helm renders the chart for the proposal as for Argo CD.
	path := "PATH=" + binDir + string(os.PathListSeparator) + e.Renderers + string(os.PathListSeparator) + os.Getenv("PATH")
	oncall := newUser(t, env.Oncall.Name, "GITHUB_TOKEN="+githubToken, path)

	mustRun(t, oncall, 0, "breakglass", "pr-helm-refused", "deployment/web", "--patch", hotfixPatch, "--reason", "5xx after 1.0.0", "-y")
	_, errOut := mustRun(t, oncall, 1, "propose", "pr-helm-refused", "--provider", "github", "--api-url", github.API(), "--project", "acme/deploy")
	if !strings.Contains(errOut, "/spec/minReadySeconds is not a single value the chart renders") || !strings.Contains(errOut, "by hand") {
		t.Errorf("propose of a field no value yields: %s", errOut)
	}
	if e.Git.HasBranch(breakglass.ProposalBranch(sessionOf(t, "pr-helm-refused").ID)) {
		t.Error("a refused proposal pushed a branch")
	}

	out, errOut := mustRun(t, oncall, 0, "breakglass", "pr-helm", "deployment/web", "--image", "web=registry.example/web:hotfix", "--replicas", "4",
		"--reason", "5xx after 1.0.0", "--auto-restore", "--propose", "--provider", "github", "--api-url", github.API(), "--project", "acme/deploy", "-y")
	if !strings.Contains(out, "opened PR #4") {
		t.Fatalf("breakglass --propose:\n%s\n%s", out, errOut)
	}
	session := sessionOf(t, "pr-helm").ID
	branch := breakglass.ProposalBranch(session)
	for file, want := range map[string]string{
		"values-prod.yaml":          strings.Replace(files["apps/pr-helm/chart/values-prod.yaml"], `tag: "1.0.0"`, `tag: "hotfix"`, 1),
		"values.yaml":               strings.Replace(files["apps/pr-helm/chart/values.yaml"], "replicaCount: 2", "replicaCount: 4", 1),
		"templates/deployment.yaml": files["apps/pr-helm/chart/templates/deployment.yaml"],
	} {
		got, err := e.Git.Show(branch, "apps/pr-helm/chart/"+file)
		if err != nil || got+"\n" != want {
			t.Errorf("%s on the branch: %v\n%s\nwant:\n%s", file, err, got, want)
		}
	}
	rendersLive(t, "pr-helm", head, proposedCommit(t, session), "/spec/replicas", "/spec/template/spec/containers/web/image")
	mergeAndRestore(t, github, 4, "pr-helm", session)
	if got := imageIn(context.Background(), t, "pr-helm"); got != "registry.example/web:hotfix" {
		t.Errorf("live image after the restore: %s", got)
	}
}

// proposedCommit is the commit session's breakglass.proposed record names.
func proposedCommit(t *testing.T, session string) string {
	t.Helper()
	for _, r := range sessionRecords(t, session) {
		if r.Event == audit.EventProposed && r.Proposal != nil && r.Proposal.Commit != "" {
			return r.Proposal.Commit
		}
	}
	t.Fatalf("session %s has no breakglass.proposed record with a commit", session)
	return ""
}

// rendersLive asks Argo CD to render app at the proposal's commit and at
// base, and checks the two differ at paths of deployment/web alone (all
// of hotfixPaths when none are given), where the commit renders the live
// values: Argo CD's own render, not the proposal's, is the judge.
func rendersLive(t *testing.T, app, base, commit string, paths ...string) {
	t.Helper()
	if len(paths) == 0 {
		paths = hotfixPaths
	}
	e := environment(t)
	ctx := context.Background()
	token, err := e.ArgoToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	argo := argocd.Server{Addr: e.ArgoServerAddr, Plaintext: true, Token: token}
	was, err := argo.Manifests(ctx, e.ArgoNamespace, app, audit.Git{Revision: base})
	if err != nil {
		t.Fatal(err)
	}
	now, err := argo.Manifests(ctx, e.ArgoNamespace, app, audit.Git{Revision: commit})
	if err != nil {
		t.Fatal(err)
	}
	if len(was) != len(now) {
		t.Fatalf("Argo CD renders %d objects at the proposal, %d before", len(now), len(was))
	}
	d, err := kubeFor(t, env.Admin.Name).AppsV1().Deployments(app).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		t.Fatal(err)
	}
	for i := range was {
		var changed []string
		for _, c := range audit.Diff(was[i], now[i]) {
			changed = append(changed, c.Path)
		}
		sort.Strings(changed)
		kind, _ := now[i]["kind"].(string)
		if kind != "Deployment" {
			if len(changed) > 0 {
				t.Errorf("the proposal also changes %s at %v", kind, changed)
			}
			continue
		}
		if strings.Join(changed, " ") != strings.Join(paths, " ") {
			t.Errorf("the proposal changes deployment/web at %v, want %v", changed, paths)
		}
		for _, p := range paths {
			rendered, _ := audit.Lookup(now[i], p)
			held, _ := audit.Lookup(live, p)
			if fmt.Sprint(rendered) != fmt.Sprint(held) {
				t.Errorf("Argo CD renders %s = %v at the proposal, live is %v", p, rendered, held)
			}
		}
	}
}

// assertLiveFix checks the fix of hotfixPatch is live after the restore.
func assertLiveFix(t *testing.T, app string) {
	t.Helper()
	d, err := kubeFor(t, env.Admin.Name).AppsV1().Deployments(app).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Template.Spec.Containers[0].Image != "registry.example/web:hotfix" || *d.Spec.Replicas != 4 || d.Spec.MinReadySeconds != 5 {
		t.Errorf("live after the restore: image %s, replicas %d, minReadySeconds %d", d.Spec.Template.Spec.Containers[0].Image, *d.Spec.Replicas, d.Spec.MinReadySeconds)
	}
}
