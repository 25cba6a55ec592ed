// Package image is kubectl-livesync's only door to container registries: it parses
// image references and imageIDs, resolves tags to digests, and judges whether running
// pods are stale. It speaks plain strings and errors so that no caller ever handles a
// go-containerregistry type.
package image

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// dockerHub is how users and Kubernetes write Docker Hub; go-containerregistry
// rewrites it to index.docker.io, which nobody types.
const dockerHub = "docker.io"

// Reference is a parsed image reference. Written keeps the user's spelling so that
// patches change only the digest and never expand "nginx" to a fully qualified name.
type Reference struct {
	// Written is the reference exactly as it appears in the pod spec.
	Written string
	// Registry is the registry host as users write it: "docker.io", "ghcr.io", "127.0.0.1:5000".
	Registry string
	// Repository is the path inside the registry, "library/nginx" for "nginx".
	Repository string
	// Tag is the tag to resolve: "latest" when none was written (see ImplicitTag),
	// "" for a digest-only reference.
	Tag string
	// ImplicitTag reports that Tag is the "latest" Kubernetes assumes for a reference
	// with neither tag nor digest.
	ImplicitTag bool
	// Digest is the pinned "sha256:…" digest, "" when the reference is not pinned.
	Digest string
}

// ParseReference parses an image reference the way Kubernetes reads pod specs:
// Docker Hub by default, "library/" for official images, "latest" when nothing is given.
func ParseReference(s string) (Reference, error) {
	base, digest, pinned := strings.Cut(s, "@")
	if pinned {
		if _, err := v1.NewHash(digest); err != nil {
			return Reference{}, fmt.Errorf("parsing image %q: invalid digest %q: %w", s, digest, err)
		}
	}
	// A colon after the last slash is a tag; one before it belongs to a registry port.
	explicitTag := strings.LastIndex(base, ":") > strings.LastIndex(base, "/")
	tag, err := name.NewTag(base)
	if err != nil {
		return Reference{}, fmt.Errorf("parsing image %q: %w", s, err)
	}
	r := Reference{
		Written:    s,
		Registry:   displayRegistry(tag.RegistryStr()),
		Repository: tag.RepositoryStr(),
		Digest:     digest,
	}
	switch {
	case explicitTag:
		r.Tag = tag.TagStr()
	case !pinned:
		r.Tag, r.ImplicitTag = tag.TagStr(), true
	}
	return r, nil
}

func displayRegistry(r string) string {
	if r == name.DefaultRegistry {
		return dockerHub
	}
	return r
}

// String returns the reference as written, so %q shows users their own spelling.
func (r Reference) String() string { return r.Written }

// Name returns the canonical "registry/repository" for messages, e.g. "docker.io/library/nginx".
func (r Reference) Name() string { return r.Registry + "/" + r.Repository }

// WithoutDigest returns the reference as written minus any pinned digest: the tag
// form a user would recognise. A digest-only reference becomes the bare repository.
func (r Reference) WithoutDigest() string {
	base, _, _ := strings.Cut(r.Written, "@")
	return base
}

// WithDigest returns the image string to write into a pod spec to pin digest d,
// replacing any digest already pinned. The repository keeps the user's spelling. An
// implicit tag is written out as ":latest" so the pinned string still names the tag
// that a later refresh must resolve; without it, "nginx@sha256:…" would have no tag
// left to follow. (Kubernetes defaults imagePullPolicy to Always for an explicit
// ":latest" even with a digest; that costs one manifest check, never a different image.)
func (r Reference) WithDigest(d string) string {
	s := r.WithoutDigest()
	if r.ImplicitTag {
		s += ":" + r.Tag
	}
	return s + "@" + d
}

// ImageIDDigest extracts the manifest digest from a containerStatuses[].imageID,
// whatever the runtime's spelling: "docker-pullable://repo@sha256:…" (dockershim,
// cri-dockerd), "docker.io/library/nginx@sha256:…" (containerd, CRI-O) or a bare
// "sha256:…". It returns "" when there is none, e.g. before the image was pulled.
//
// A bare digest can also be the image's config digest, which some runtimes report
// for images loaded onto the node without a registry (kind load); it then never
// equals a registry digest, which correctly reads as "not what the tag serves".
func ImageIDDigest(imageID string) string {
	s := imageID
	if _, rest, ok := strings.Cut(s, "://"); ok {
		s = rest
	}
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		s = s[i+1:]
	}
	if _, err := v1.NewHash(s); err != nil {
		return ""
	}
	return s
}
