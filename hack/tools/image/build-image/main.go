// Command build-image builds the controller's container image without a
// container runtime (make image runs it from the repository's root):
//
//	build-image -version v0.1.0 -revision SHA -dist dist -cyclonedx-gomod PATH
//
// For each platform it builds the static binary (CGO_ENABLED=0, -trimpath,
// the ldflags of make build) and puts it in one layer on an empty base, with
// /etc/passwd and /etc/group naming the non-root user 65532 and the CA
// bundle of the machine it runs on: no shell, no package manager, nothing
// else to run. The images go under one index in an OCI image layout,
// dist/image, tagged with the version. Each binary's CycloneDX SBOM is
// written beside it, dist/kubectl-gitops_VERSION_image_OS_ARCH.cdx.json,
// and attached in the layout as an artifact whose subject is its image.
//
// No base image is pulled: none can be here, and the base would add
// nothing the controller uses.
package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// entrypoint is where the binary lives in the image; the Deployment in
	// deploy/controller names it as its command.
	entrypoint = "/kubectl-gitops"
	// nonroot is the user and group the image runs as, distroless's number.
	nonroot = 65532
	source  = "https://github.com/kubectl-gitops/kubectl-gitops"
	// cyclonedxJSON is the media type of a CycloneDX JSON SBOM.
	cyclonedxJSON = "application/vnd.cyclonedx+json"
)

// options are the flags: what to build and where.
type options struct {
	version, revision, ldflags, dist, sbomTool, caBundle string
	platforms                                            []v1.Platform
	created                                              time.Time
}

// built is one platform's image and the SBOM of its binary.
type built struct {
	image v1.Image
	sbom  []byte
	name  string
}

func main() {
	var o options
	var platforms, created string
	flag.StringVar(&o.version, "version", "v0.1.0-dev", "semver version, with the leading v: the image's tag and version label")
	flag.StringVar(&o.revision, "revision", "", "the Git commit built, for the revision label")
	flag.StringVar(&created, "created", "", "RFC 3339 time the image says it was created, and of its files (default: the Unix epoch, for reproducible images)")
	flag.StringVar(&o.ldflags, "ldflags", "", "extra -ldflags for go build (the version stamp)")
	flag.StringVar(&o.dist, "dist", "dist", "directory for the image layout (DIST/image) and the SBOMs")
	flag.StringVar(&o.sbomTool, "cyclonedx-gomod", "", "the cyclonedx-gomod binary that writes the SBOMs (hack/tools/build.sh image builds it)")
	flag.StringVar(&o.caBundle, "ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to install as /etc/ssl/certs/ca-certificates.crt")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
	flag.Parse()
	if err := o.complete(platforms, created); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func (o *options) complete(platforms, created string) error {
	if !strings.HasPrefix(o.version, "v") {
		return fmt.Errorf("-version %q must start with v (as the release archives' versions do)", o.version)
	}
	if o.sbomTool == "" {
		return fmt.Errorf("-cyclonedx-gomod is required: the path printed by hack/tools/build.sh image")
	}
	if created != "" {
		t, err := time.Parse(time.RFC3339, created)
		if err != nil {
			return fmt.Errorf("-created: %w", err)
		}
		o.created = t.UTC()
	} else {
		o.created = time.Unix(0, 0).UTC()
	}
	for _, spec := range strings.Split(platforms, ",") {
		p, err := v1.ParsePlatform(strings.TrimSpace(spec))
		if err != nil || p.OS != "linux" || p.Architecture == "" || p.Variant != "" {
			return fmt.Errorf("-platforms: %q is not linux/ARCH (the controller runs on Linux nodes)", spec)
		}
		o.platforms = append(o.platforms, *p)
	}
	return nil
}

func run(o options) error {
	work, err := os.MkdirTemp("", "build-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if err := os.MkdirAll(o.dist, 0o755); err != nil {
		return err
	}
	var images []built
	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.platforms {
		b, err := o.build(work, p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(o.dist, b.name), b.sbom, 0o644); err != nil {
			return err
		}
		index = mutate.AppendManifests(index, mutate.IndexAddendum{Add: b.image, Descriptor: v1.Descriptor{Platform: &p}})
		images = append(images, b)
	}
	index = mutate.Annotations(index, o.labels()).(v1.ImageIndex)

	dir := filepath.Join(o.dist, "image")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	oci, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := oci.AppendIndex(index, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": o.version})); err != nil {
		return fmt.Errorf("writing %s: %w", dir, err)
	}
	for _, b := range images {
		if err := attachSBOM(oci, b); err != nil {
			return fmt.Errorf("attaching %s: %w", b.name, err)
		}
	}
	return nil
}

// labels are the OCI labels of each image, and the annotations of the index.
func (o options) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    "kubectl-gitops",
		"org.opencontainers.image.source":   source,
		"org.opencontainers.image.version":  o.version,
		"org.opencontainers.image.revision": o.revision,
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
}

// build compiles the binary for p, describes it and puts it in an image.
func (o options) build(work string, p v1.Platform) (built, error) {
	b := built{name: fmt.Sprintf("kubectl-gitops_%s_image_%s_%s.cdx.json", o.version, p.OS, p.Architecture)}
	bin := filepath.Join(work, p.OS+"-"+p.Architecture, "kubectl-gitops")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w "+o.ldflags, "-o", bin, "./cmd/kubectl-gitops")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return b, fmt.Errorf("building %s: %w", p, err)
	}
	sbom := filepath.Join(work, b.name)
	cmd = exec.Command(o.sbomTool, "bin", "-json", "-version", o.version, "-output", sbom, bin)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return b, fmt.Errorf("describing the %s binary with %s: %w", p, o.sbomTool, err)
	}
	var err error
	if b.sbom, err = os.ReadFile(sbom); err != nil {
		return b, err
	}
	layer, err := o.rootfs(bin)
	if err != nil {
		return b, err
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: o.created}, CreatedBy: "hack/tools/image/build-image", Comment: "kubectl-gitops " + o.version},
	})
	if err != nil {
		return b, err
	}
	config, err := img.ConfigFile()
	if err != nil {
		return b, err
	}
	config = config.DeepCopy()
	config.OS, config.Architecture = p.OS, p.Architecture
	config.Created = v1.Time{Time: o.created}
	config.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", nonroot, nonroot),
		Entrypoint: []string{entrypoint},
		WorkingDir: "/home/nonroot",
		Labels:     o.labels(),
	}
	img, err = mutate.ConfigFile(img, config)
	if err != nil {
		return b, err
	}
	b.image = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	return b, nil
}

// rootfs is the image's one layer: the binary, the users, the CA bundle,
// a home for the user and /tmp.
func (o options) rootfs(bin string) (v1.Layer, error) {
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	bundle, err := os.ReadFile(o.caBundle)
	if err != nil {
		return nil, fmt.Errorf("-ca-certificates: %w (install Debian's ca-certificates, or name another PEM bundle)", err)
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonroot, nonroot)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonroot)
	entries := []struct {
		name     string
		mode     int64
		owner    int
		contents []byte
	}{
		{"etc/", 0o755, 0, nil},
		{"etc/passwd", 0o644, 0, []byte(passwd)},
		{"etc/group", 0o644, 0, []byte(group)},
		{"etc/ssl/", 0o755, 0, nil},
		{"etc/ssl/certs/", 0o755, 0, nil},
		{"etc/ssl/certs/ca-certificates.crt", 0o644, 0, bundle},
		{"home/", 0o755, 0, nil},
		{"home/nonroot/", 0o700, nonroot, nil},
		{"tmp/", 0o1777, 0, nil},
		{strings.TrimPrefix(entrypoint, "/"), 0o755, 0, binary},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.owner, Gid: e.owner, ModTime: o.created, Typeflag: tar.TypeReg, Size: int64(len(e.contents))}
		if strings.HasSuffix(e.name, "/") {
			hdr.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.contents); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	tarred := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarred)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// attachSBOM adds b's SBOM to the layout as an OCI 1.1 artifact whose
// subject is b's image, so that registries and tools that follow referrers
// find it with the image.
func attachSBOM(oci layout.Path, b built) error {
	subject, err := descriptorOf(b.image)
	if err != nil {
		return err
	}
	emptyJSON := []byte("{}")
	config, err := writeBlob(oci, emptyJSON, types.OCIEmptyJSON)
	if err != nil {
		return err
	}
	sbom, err := writeBlob(oci, b.sbom, cyclonedxJSON)
	if err != nil {
		return err
	}
	sbom.Annotations = map[string]string{"org.opencontainers.image.title": b.name}
	manifest, err := json.Marshal(v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  cyclonedxJSON,
		Config:        config,
		Layers:        []v1.Descriptor{sbom},
		Subject:       &subject,
	})
	if err != nil {
		return err
	}
	desc, err := writeBlob(oci, manifest, types.OCIManifestSchema1)
	if err != nil {
		return err
	}
	desc.ArtifactType = cyclonedxJSON
	return oci.AppendDescriptor(desc)
}

// descriptorOf is the descriptor that names img.
func descriptorOf(img v1.Image) (v1.Descriptor, error) {
	digest, err := img.Digest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	size, err := img.Size()
	if err != nil {
		return v1.Descriptor{}, err
	}
	mediaType, err := img.MediaType()
	return v1.Descriptor{MediaType: mediaType, Size: size, Digest: digest}, err
}

// writeBlob stores data in the layout and returns its descriptor.
func writeBlob(oci layout.Path, data []byte, mediaType types.MediaType) (v1.Descriptor, error) {
	digest, _, err := v1.SHA256(bytes.NewReader(data))
	if err != nil {
		return v1.Descriptor{}, err
	}
	if err := oci.WriteBlob(digest, io.NopCloser(bytes.NewReader(data))); err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: mediaType, Size: int64(len(data)), Digest: digest}, nil
}
