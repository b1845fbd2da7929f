package argocd

import (
	"regexp"
	"strings"

	"github.com/kubectl-gitops/kubectl-gitops/audit"
)

// A GitChange is how to bring one live change into Git, given how the
// Application's source renders it. It is the one advice drift and the
// ticket both give, each in its own words.
type GitChange struct {
	Kind GitChangeKind
	// Path is the changed field, as Diff names it.
	Path string
	// Value is the live value (audit.Redacted for a secret).
	Value any
	// Container, Image and ImageName are set for a container image:
	// the container's name, the live image, and the image Git has without
	// its tag or digest (what `kustomize edit set image` names).
	Container, Image, ImageName string
	// ValueFile is, for a Helm image, the value file that wins (the last
	// one); "" when the chart's own values are set.
	ValueFile string
}

// A GitChangeKind says which way a change goes into Git.
type GitChangeKind string

// The ways a change goes into Git.
const (
	// ChangeValue sets the value at the path in the manifests.
	ChangeValue GitChangeKind = "value"
	// ChangeSecret is a value records withhold (a secret, free text, or a
	// field outside the kind's schema): set in Git as it is live, a secret
	// from a secret store.
	ChangeSecret GitChangeKind = "secret"
	// ChangeKustomizeImage is `kustomize edit set image` in the source path.
	ChangeKustomizeImage GitChangeKind = "kustomize-image"
	// ChangeHelmImage sets the chart's values so it renders the image.
	ChangeHelmImage GitChangeKind = "helm-image"
	// ChangeManifestImage sets the container's image in plain manifests.
	ChangeManifestImage GitChangeKind = "manifest-image"
)

// containerImage matches a container's image in a pod template, as Diff
// names the path, capturing the container's name.
var containerImage = regexp.MustCompile(`/(?:initContainers|containers)/([^/]+)/image$`)

// AdviseChange is how to bring path's live value after (before is Git's)
// into Git from src. A container image becomes the source type's way of
// setting images (Helm values for Helm, the manifest for a directory,
// else kustomize); everything else is a value at a path.
func AdviseChange(src Source, path string, before, after any) GitChange {
	c := GitChange{Kind: ChangeValue, Path: path, Value: after}
	image, isString := after.(string)
	gitImage, _ := before.(string)
	switch {
	case isString && strings.HasPrefix(image, audit.Redacted):
		c.Kind = ChangeSecret
	case isString && gitImage != "" && containerImage.MatchString(path):
		c.Container, c.Image, c.ImageName = containerImage.FindStringSubmatch(path)[1], image, imageName(gitImage)
		switch src.Type {
		case "Directory":
			c.Kind = ChangeManifestImage
		case "Helm":
			c.Kind = ChangeHelmImage
			if len(src.ValueFiles) > 0 {
				c.ValueFile = src.ValueFiles[len(src.ValueFiles)-1].Path
			}
		default:
			c.Kind = ChangeKustomizeImage
		}
	}
	return c
}

// imageName drops the tag or digest of an image reference.
func imageName(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		return ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i]
	}
	return ref
}
