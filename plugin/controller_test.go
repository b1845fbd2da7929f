package plugin

import (
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"
)

// TestControllerDeploymentRunsACommandTheBinaryTakes: the shipped
// Deployment's arguments are a command line of this binary.
func TestControllerDeploymentRunsACommandTheBinaryTakes(t *testing.T) {
	data, err := os.ReadFile("../deploy/controller/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if len(c.Command) != 1 || c.Command[0] != "/kubectl-gitops" {
		t.Fatalf("command %v: the image's binary is /kubectl-gitops", c.Command)
	}
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = strings.ReplaceAll(a, "$(POD_NAME)", "pod-0") // as the kubelet expands it
	}
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	root := NewCmdRoot(streams)
	cmd, rest, err := root.Find(args)
	if err != nil || cmd.Name() != "controller" {
		t.Fatalf("%v: finds %v, %v", args, cmd, err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("the controller does not take %v: %v", rest, err)
	}
	if err := cmd.Args(cmd, cmd.Flags().Args()); err != nil {
		t.Fatal(err)
	}
	if p := d.Spec.Template.Spec.Containers[0].ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v", p)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("the root filesystem is not read-only: %+v", sc)
	}
	if ps := d.Spec.Template.Spec.SecurityContext; ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		t.Errorf("the pod may run as root: %+v", ps)
	}
}
