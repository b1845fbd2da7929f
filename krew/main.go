// Command krew builds the plugin's release archives and renders its krew
// manifest from gitops.yaml.tmpl:
//
//	go run ./krew -version v0.1.0 -dist dist -out krew/gitops.yaml
//
// Each archive (tar.gz, zip for windows) holds the binary, LICENSE and the
// kubectl_complete-gitops script. With -cyclonedx-gomod (make krew passes
// the pinned one), each archive's binary is described by a CycloneDX SBOM
// beside it, the archive's name with .cdx.json for its extension.
// dist/SHA256SUMS lists the digests of the archives and SBOMs.
package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"
)

// Platform is one os/arch build in the manifest.
type Platform struct {
	OS, Arch, URI, SHA256, Bin string
	// Complete is the completion shim kubectl runs for "kubectl gitops
	// …": the sh script, or on Windows a .cmd (a script with a #! line
	// does not run there).
	Complete        string
	archive, binary string
}

// archiveFile is one file an archive holds: its name inside, its source.
type archiveFile struct{ name, path string }

const defaultPlatforms = "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64,windows/arm64"

func main() {
	version := flag.String("version", "v0.1.0-dev", "semver version, with the leading v")
	dist := flag.String("dist", "dist", "directory for binaries and archives")
	out := flag.String("out", "krew/gitops.yaml", "where to write the rendered manifest")
	tmpl := flag.String("template", "krew/gitops.yaml.tmpl", "manifest template")
	platforms := flag.String("platforms", defaultPlatforms, "comma-separated os/arch list")
	baseURL := flag.String("base-url", "", "where the archives will be downloaded from (default: the GitHub release of -version)")
	ldflags := flag.String("ldflags", "", "extra -ldflags for go build (the version stamp)")
	sbomTool := flag.String("cyclonedx-gomod", "", "the cyclonedx-gomod binary that writes each binary's SBOM (none without it)")
	flag.Parse()
	if *baseURL == "" {
		*baseURL = "https://github.com/kubectl-gitops/kubectl-gitops/releases/download/" + *version
	}
	if err := run(*version, *dist, *out, *tmpl, *platforms, *baseURL, *ldflags, *sbomTool); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(version, dist, out, tmplPath, platforms, baseURL, ldflags, sbomTool string) error {
	if !strings.HasPrefix(version, "v") {
		return fmt.Errorf("-version %q must start with v (krew wants semver such as v0.1.0)", version)
	}
	if err := os.MkdirAll(dist, 0o755); err != nil {
		return err
	}
	var built []Platform
	var sums bytes.Buffer
	for _, spec := range strings.Split(platforms, ",") {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(spec), "/")
		if !ok {
			return fmt.Errorf("-platforms: %q is not os/arch", spec)
		}
		p, err := buildPlatform(version, dist, goos, goarch, ldflags)
		if err != nil {
			return err
		}
		p.URI = strings.TrimSuffix(baseURL, "/") + "/" + filepath.Base(p.archive)
		fmt.Fprintf(&sums, "%s  %s\n", p.SHA256, filepath.Base(p.archive))
		if sbomTool != "" {
			sbom, err := describe(sbomTool, version, p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&sums, "%s  %s\n", sbom, filepath.Base(p.sbom()))
		}
		built = append(built, p)
	}
	if err := os.WriteFile(filepath.Join(dist, "SHA256SUMS"), sums.Bytes(), 0o644); err != nil {
		return err
	}
	manifest, err := render(tmplPath, version, built)
	if err != nil {
		return err
	}
	return os.WriteFile(out, manifest, 0o644)
}

// render is the krew manifest of version's platforms, from the template
// at tmplPath.
func render(tmplPath, version string, platforms []Platform) ([]byte, error) {
	t, err := template.ParseFiles(tmplPath)
	if err != nil {
		return nil, err
	}
	var manifest bytes.Buffer
	err = t.Execute(&manifest, struct {
		Version   string
		Platforms []Platform
	}{version, platforms})
	return manifest.Bytes(), err
}

// completionShim is the completion shim a platform's archive holds.
func completionShim(goos string) string {
	if goos == "windows" {
		return "kubectl_complete-gitops.cmd"
	}
	return "kubectl_complete-gitops"
}

func buildPlatform(version, dist, goos, goarch, ldflags string) (Platform, error) {
	p := Platform{OS: goos, Arch: goarch, Bin: "kubectl-gitops", Complete: completionShim(goos)}
	if goos == "windows" {
		p.Bin += ".exe"
	}
	bin := filepath.Join(dist, goos+"-"+goarch, p.Bin)
	p.binary = bin
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w "+ldflags, "-o", bin, "./cmd/kubectl-gitops")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return p, fmt.Errorf("building %s/%s: %w", goos, goarch, err)
	}
	files := []archiveFile{{p.Bin, bin}, {"LICENSE", "LICENSE"}, {p.Complete, p.Complete}}
	base := filepath.Join(dist, fmt.Sprintf("kubectl-gitops_%s_%s_%s", version, goos, goarch))
	write := tarGz
	p.archive = base + ".tar.gz"
	if goos == "windows" {
		write, p.archive = zipped, base+".zip"
	}
	var buf bytes.Buffer
	if err := write(&buf, files); err != nil {
		return p, err
	}
	if err := os.WriteFile(p.archive, buf.Bytes(), 0o644); err != nil {
		return p, err
	}
	sum := sha256.Sum256(buf.Bytes())
	p.SHA256 = hex.EncodeToString(sum[:])
	return p, nil
}

// sbom is where the SBOM of p's binary goes: beside its archive.
func (p Platform) sbom() string {
	return strings.TrimSuffix(strings.TrimSuffix(p.archive, ".zip"), ".tar.gz") + ".cdx.json"
}

// describe writes the CycloneDX SBOM of p's binary with cyclonedx-gomod
// (which reads the modules the Go linker recorded in it) and returns its
// SHA-256.
func describe(sbomTool, version string, p Platform) (string, error) {
	cmd := exec.Command(sbomTool, "bin", "-json", "-version", version, "-output", p.sbom(), p.binary)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("describing the %s/%s binary with %s: %w", p.OS, p.Arch, sbomTool, err)
	}
	data, err := os.ReadFile(p.sbom())
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// mtime is fixed so that the same inputs give byte-identical archives.
var mtime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func mode(name string) os.FileMode {
	if name == "LICENSE" {
		return 0o644
	}
	return 0o755
}

func tarGz(w io.Writer, files []archiveFile) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		content, err := os.ReadFile(f.path)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: f.name, Mode: int64(mode(f.name)), Size: int64(len(content)), ModTime: mtime, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(content); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func zipped(w io.Writer, files []archiveFile) error {
	zw := zip.NewWriter(w)
	for _, f := range files {
		content, err := os.ReadFile(f.path)
		if err != nil {
			return err
		}
		hdr := &zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: mtime}
		hdr.SetMode(mode(f.name))
		entry, err := zw.CreateHeader(hdr)
		if err != nil {
			return err
		}
		if _, err := entry.Write(content); err != nil {
			return err
		}
	}
	return zw.Close()
}
