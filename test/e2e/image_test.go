//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-gitops/kubectl-gitops/test/env"
)

// The OCI image layout, read here with encoding/json and archive/tar as a
// runtime would, not with the code that wrote it (hack/tools/image).
type (
	ociDescriptor struct {
		MediaType    string            `json:"mediaType"`
		Digest       string            `json:"digest"`
		Size         int64             `json:"size"`
		ArtifactType string            `json:"artifactType"`
		Annotations  map[string]string `json:"annotations"`
		Platform     *struct {
			OS           string `json:"os"`
			Architecture string `json:"architecture"`
		} `json:"platform"`
	}
	ociIndex struct {
		Manifests []ociDescriptor `json:"manifests"`
	}
	ociManifest struct {
		MediaType    string          `json:"mediaType"`
		ArtifactType string          `json:"artifactType"`
		Config       ociDescriptor   `json:"config"`
		Layers       []ociDescriptor `json:"layers"`
		Subject      *ociDescriptor  `json:"subject"`
	}
	ociConfig struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
		Config       struct {
			User       string            `json:"User"`
			Entrypoint []string          `json:"Entrypoint"`
			Cmd        []string          `json:"Cmd"`
			Labels     map[string]string `json:"Labels"`
		} `json:"config"`
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	// imageFile is one entry of the image's filesystem, its contents kept.
	imageFile struct {
		header   *tar.Header
		contents []byte
	}
)

const (
	ociIndexType    = "application/vnd.oci.image.index.v1+json"
	ociManifestType = "application/vnd.oci.image.manifest.v1+json"
	cyclonedxType   = "application/vnd.cyclonedx+json"
)

// TestControllerImage builds the controller's image as a release does
// (make image, with no container runtime) for this machine's platform,
// reads the OCI layout back, and checks what a cluster would run: a
// numeric non-root user, the entrypoint the Deployment names, no shell nor
// any other program, and the binary taken from the layer accepting the
// Deployment's exact arguments. The SBOM beside it, and attached in the
// layout, lists the modules the binary is built from.
func TestControllerImage(t *testing.T) {
	suite(t)
	if runtime.GOOS != "linux" {
		t.Skip("the image's linux binary runs only on linux")
	}
	dist := t.TempDir()
	platform := "linux/" + runtime.GOARCH
	build := exec.Command("make", "image", "DIST="+dist, "VERSION="+testVersion, "IMAGE_PLATFORMS="+platform)
	build.Dir = env.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	layout := filepath.Join(dist, "image")
	manifestDesc, manifest := imageManifest(t, layout, testVersion, platform)
	var config ociConfig
	readJSON(t, layout, manifest.Config, &config)
	files := imageFiles(t, layout, manifest, config)
	container, pod := deployedController(t)

	t.Run("runs as the Deployment's non-root user", func(t *testing.T) {
		uid, gid, ok := strings.Cut(config.Config.User, ":")
		u, errU := strconv.Atoi(uid)
		g, errG := strconv.Atoi(gid)
		// runAsNonRoot can only be checked by the kubelet for a numeric user.
		if !ok || errU != nil || errG != nil || u == 0 {
			t.Fatalf("image user %q is not a numeric non-root uid:gid", config.Config.User)
		}
		if sc := pod.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != int64(u) || sc.RunAsGroup == nil || *sc.RunAsGroup != int64(g) {
			t.Errorf("the Deployment's runAsUser/runAsGroup are not the image's %s", config.Config.User)
		}
		passwd, group := string(files["etc/passwd"].contents), string(files["etc/group"].contents)
		if !strings.Contains(passwd, ":x:"+uid+":"+gid+":") || !strings.Contains(group, ":x:"+gid+":") {
			t.Errorf("/etc/passwd and /etc/group do not name %s:\n%s%s", config.Config.User, passwd, group)
		}
		home := files["home/nonroot"].header
		if home == nil || home.Uid != u {
			t.Errorf("the user's home /home/nonroot is not owned by %d", u)
		}
	})

	t.Run("entrypoint is the binary and nothing else runs", func(t *testing.T) {
		if !slices.Equal(config.Config.Entrypoint, container.Command) || len(config.Config.Cmd) != 0 {
			t.Errorf("image entrypoint %q cmd %q; the Deployment's command is %q", config.Config.Entrypoint, config.Config.Cmd, container.Command)
		}
		if config.OS != "linux" || config.Architecture != runtime.GOARCH {
			t.Errorf("image platform %s/%s, want %s", config.OS, config.Architecture, platform)
		}
		entry := strings.TrimPrefix(path.Clean(config.Config.Entrypoint[0]), "/")
		for name, f := range files {
			switch base := path.Base(name); {
			case slices.Contains([]string{"sh", "bash", "dash", "ash", "zsh", "ksh", "mksh", "csh", "tcsh", "fish", "busybox", "toybox"}, base):
				t.Errorf("the image holds a shell: /%s", name)
			case f.header.Typeflag == tar.TypeSymlink || f.header.Typeflag == tar.TypeLink:
				t.Errorf("the image holds a link: /%s -> %s", name, f.header.Linkname)
			case f.header.Typeflag == tar.TypeReg && f.header.Mode&0o111 != 0 && name != entry:
				t.Errorf("the image holds another executable: /%s", name)
			}
		}
		if len(files["etc/ssl/certs/ca-certificates.crt"].contents) == 0 {
			t.Error("the image has no CA bundle at /etc/ssl/certs/ca-certificates.crt (Jira and Argo CD over TLS)")
		}
		for label, want := range map[string]string{
			"org.opencontainers.image.version": testVersion,
			"org.opencontainers.image.source":  "https://github.com/kubectl-gitops/kubectl-gitops",
		} {
			if got := config.Config.Labels[label]; got != want {
				t.Errorf("label %s = %q, want %q", label, got, want)
			}
		}
		if config.Config.Labels["org.opencontainers.image.revision"] == "" {
			t.Error("the image has no revision label")
		}
	})

	t.Run("binary accepts the Deployment's arguments", func(t *testing.T) {
		entry := strings.TrimPrefix(path.Clean(config.Config.Entrypoint[0]), "/")
		bin := filepath.Join(t.TempDir(), path.Base(entry))
		f, ok := files[entry]
		if !ok || f.header.Mode&0o111 == 0 {
			t.Fatalf("the entrypoint %s is not an executable file of the image", config.Config.Entrypoint[0])
		}
		if err := os.WriteFile(bin, f.contents, 0o755); err != nil {
			t.Fatal(err)
		}
		args := expandArgs(t, container)
		// cobra parses every flag before it looks at --help, so an unknown
		// flag or a bad value fails here though nothing is started.
		out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s --help: %v\n%s", container.Command[0], strings.Join(args, " "), err, out)
		}
		if !strings.Contains(string(out), "kubectl gitops controller") {
			t.Errorf("the Deployment's arguments do not reach the controller command:\n%s", out)
		}
		if out, err := exec.Command(bin, "version", "--client").CombinedOutput(); err != nil || !strings.Contains(string(out), testVersion) {
			t.Errorf("the image's binary is not the version built (%v):\n%s", err, out)
		}
		// The check above proves the flags only if an unknown one fails.
		out, err = exec.Command(bin, append(args, "--no-such-flag", "--help")...).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "unknown flag: --no-such-flag") {
			t.Errorf("an unknown flag beside --help did not fail with exit 2 (%v):\n%s", err, out)
		}
	})

	t.Run("SBOM lists the binary's modules", func(t *testing.T) {
		name := "kubectl-gitops_" + testVersion + "_image_linux_" + runtime.GOARCH + ".cdx.json"
		sbom, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		assertSBOMListsModules(t, sbom, "linux", runtime.GOARCH)
		attached := attachedSBOM(t, layout, manifestDesc)
		if !bytes.Equal(attached, sbom) {
			t.Errorf("the SBOM attached to the image in the layout is not %s", name)
		}
	})
}

// layoutIndex is the layout's index.json, parsed and as written.
func layoutIndex(t *testing.T, layout string) (ociIndex, []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var top ociIndex
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	return top, data
}

// imageManifest follows the layout's index.json to the image index tagged
// version, and from it to the manifest of platform.
func imageManifest(t *testing.T, layout, version, platform string) (ociDescriptor, ociManifest) {
	t.Helper()
	top, data := layoutIndex(t, layout)
	var tagged []ociDescriptor
	for _, d := range top.Manifests {
		if d.Annotations["org.opencontainers.image.ref.name"] == version {
			tagged = append(tagged, d)
		}
	}
	if len(tagged) != 1 || tagged[0].MediaType != ociIndexType {
		t.Fatalf("index.json does not tag one image index %s: %s", version, data)
	}
	var index ociIndex
	readJSON(t, layout, tagged[0], &index)
	for _, d := range index.Manifests {
		if d.Platform != nil && d.Platform.OS+"/"+d.Platform.Architecture == platform {
			if d.MediaType != ociManifestType {
				t.Fatalf("the %s image is a %s", platform, d.MediaType)
			}
			var m ociManifest
			readJSON(t, layout, d, &m)
			return d, m
		}
	}
	t.Fatalf("the image index has no %s image: %+v", platform, index.Manifests)
	return ociDescriptor{}, ociManifest{}
}

// blob reads the blob d names, checking its size and digest.
func blob(t *testing.T, layout string, d ociDescriptor) []byte {
	t.Helper()
	algorithm, hexDigest, _ := strings.Cut(d.Digest, ":")
	if algorithm != "sha256" {
		t.Fatalf("blob %s: not a sha256 digest", d.Digest)
	}
	data, err := os.ReadFile(filepath.Join(layout, "blobs", "sha256", hexDigest))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != hexDigest || int64(len(data)) != d.Size {
		t.Fatalf("blob %s does not match its descriptor (size %d, want %d)", d.Digest, len(data), d.Size)
	}
	return data
}

func readJSON(t *testing.T, layout string, d ociDescriptor, v any) {
	t.Helper()
	if err := json.Unmarshal(blob(t, layout, d), v); err != nil {
		t.Fatalf("blob %s (%s): %v", d.Digest, d.MediaType, err)
	}
}

// imageFiles unpacks the image's layers in order, each checked against
// its diff ID, into one map of path (without the leading /) to file.
func imageFiles(t *testing.T, layout string, m ociManifest, config ociConfig) map[string]imageFile {
	t.Helper()
	if len(m.Layers) != len(config.RootFS.DiffIDs) {
		t.Fatalf("%d layers, %d diff IDs", len(m.Layers), len(config.RootFS.DiffIDs))
	}
	files := map[string]imageFile{}
	for i, l := range m.Layers {
		if l.MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
			t.Fatalf("layer %d is a %s", i, l.MediaType)
		}
		gz, err := gzip.NewReader(bytes.NewReader(blob(t, layout, l)))
		if err != nil {
			t.Fatal(err)
		}
		uncompressed, err := io.ReadAll(gz)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(uncompressed); "sha256:"+hex.EncodeToString(sum[:]) != config.RootFS.DiffIDs[i] {
			t.Fatalf("layer %d does not match its diff ID", i)
		}
		tr := tar.NewReader(bytes.NewReader(uncompressed))
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			contents, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimSuffix(strings.TrimPrefix(path.Clean("/"+hdr.Name), "/"), "/")] = imageFile{hdr, contents}
		}
	}
	return files
}

// attachedSBOM is the CycloneDX SBOM the layout holds for the image d.
func attachedSBOM(t *testing.T, layout string, d ociDescriptor) []byte {
	t.Helper()
	top, data := layoutIndex(t, layout)
	for _, a := range top.Manifests {
		if a.ArtifactType != cyclonedxType {
			continue
		}
		var m ociManifest
		readJSON(t, layout, a, &m)
		if m.Subject != nil && m.Subject.Digest == d.Digest && len(m.Layers) == 1 && m.Layers[0].MediaType == cyclonedxType {
			return blob(t, layout, m.Layers[0])
		}
	}
	t.Fatalf("the layout attaches no CycloneDX SBOM to %s: %s", d.Digest, data)
	return nil
}

// deployedController is the controller container and pod of the shipped
// Deployment, deploy/controller/deployment.yaml.
func deployedController(t *testing.T) (corev1.Container, corev1.PodSpec) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.RepoRoot(), "deploy", "controller", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(data, &d); err != nil {
		t.Fatalf("deploy/controller/deployment.yaml: %v", err)
	}
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 || len(pod.Containers[0].Command) != 1 {
		t.Fatalf("deploy/controller/deployment.yaml: want one container with one command, got %+v", pod.Containers)
	}
	return pod.Containers[0], pod
}

// expandArgs is the container's args with $(VAR) expanded as the kubelet
// does from the container's env; a variable set from the pod's fields
// takes a pod's value.
func expandArgs(t *testing.T, c corev1.Container) []string {
	t.Helper()
	var pairs []string
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
				t.Fatalf("env %s: only metadata.name is known to this test", e.Name)
			}
			value = "kubectl-gitops-controller-5f7c9d8b6-x2x9q"
		}
		pairs = append(pairs, "$("+e.Name+")", value)
	}
	expand := strings.NewReplacer(pairs...)
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = expand.Replace(a)
		if strings.Contains(args[i], "$(") {
			t.Fatalf("arg %q names a variable the container does not set", a)
		}
	}
	return args
}

// assertSBOMListsModules checks a CycloneDX SBOM against the modules Go
// links into the plugin for goos/goarch: each with its version, the main
// module as what it describes.
func assertSBOMListsModules(t *testing.T, data []byte, goos, goarch string) {
	t.Helper()
	var sbom struct {
		BOMFormat string `json:"bomFormat"`
		Metadata  struct {
			Component struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"component"`
		} `json:"metadata"`
		Components []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
			PURL    string `json:"purl"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &sbom); err != nil || sbom.BOMFormat != "CycloneDX" {
		t.Fatalf("not a CycloneDX JSON SBOM (%v): %.200s", err, data)
	}
	if c := sbom.Metadata.Component; c.Name != "github.com/kubectl-gitops/kubectl-gitops" || c.Version != testVersion {
		t.Errorf("the SBOM describes %s %s, want github.com/kubectl-gitops/kubectl-gitops %s", c.Name, c.Version, testVersion)
	}
	listed := map[string]string{}
	for _, c := range sbom.Components {
		listed[c.Name] = c.Version
	}
	list := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}", "./cmd/kubectl-gitops")
	list.Dir = env.RepoRoot()
	list.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	linked := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if module, version, ok := strings.Cut(line, " "); ok {
			linked[module] = version
		}
	}
	if linked["k8s.io/client-go"] == "" {
		t.Fatalf("go list does not show k8s.io/client-go among the plugin's modules:\n%s", out)
	}
	for module, version := range linked {
		if listed[module] != version {
			t.Errorf("the SBOM lists %s at %q; the binary links %s", module, listed[module], version)
		}
	}
	for module := range listed {
		if _, ok := linked[module]; !ok {
			t.Errorf("the SBOM lists %s, which the binary does not link", module)
		}
	}
}
