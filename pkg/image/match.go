package image

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// How a running imageID relates to what the registry serves. A runtime may report any of three
// digests for the same bytes: containerd the index digest of a multi-platform tag, most runtimes
// the platform manifest's, and a bare config digest for an image loaded into the node without a
// registry (kind load, ctr import) or after a runtime restart turned it into an ID (cri-o PR
// #9987).
const (
	// MatchIndex: the imageID is the tag's current index digest.
	MatchIndex = "index"
	// MatchManifest: the imageID is the digest of one of the tag's current platform manifests
	// (the tag's digest itself for a single-platform image).
	MatchManifest = "manifest"
	// MatchConfig: the imageID is the config digest of one of the tag's current images.
	MatchConfig = "config"
	// MatchOlder: not what the tag serves now, but a manifest or index the repository still
	// serves: the tag moved away from it.
	MatchOlder = "older"
	// MatchNone: the registry knows no such digest; the bytes cannot be placed.
	MatchNone = "none"
)

// Digests are the three names of what a tag serves now.
type Digests struct {
	// Index is the tag's digest when it is a multi-platform index, else "".
	Index string `json:"index,omitempty"`
	// Manifests are the platform manifests' digests (the tag's own for a single image).
	Manifests []string `json:"manifests"`
	// Configs are the config digests of those manifests, in the same order.
	Configs []string `json:"configs"`
}

// maxPlatforms bounds the manifests read from one index: config digests cost a request each.
const maxPlatforms = 16

// Match names which of d's digests the running digest is: MatchIndex, MatchManifest or
// MatchConfig, or "" when none.
func (d Digests) Match(running string) string {
	switch running {
	case "":
		return ""
	case d.Index:
		return MatchIndex
	}
	for _, m := range d.Manifests {
		if running == m {
			return MatchManifest
		}
	}
	for _, c := range d.Configs {
		if running == c {
			return MatchConfig
		}
	}
	return ""
}

// Describe reads what ref's tag serves now: its index (if any), every platform manifest of it
// (up to 16) and their configs. It costs a GET per manifest, so callers ask only when a running
// digest is not simply the tag's digest.
func (r *Resolver) Describe(ctx context.Context, ref Reference) (Digests, error) {
	if ref.Tag == "" {
		return Digests{}, &resolveError{msg: fmt.Sprintf("describing %q: no tag to read", ref.Written), kind: ErrNoTag}
	}
	tag, err := name.NewTag(ref.Registry+"/"+ref.Repository+":"+ref.Tag, r.nameOpts(ref)...)
	if err != nil {
		return Digests{}, fmt.Errorf("describing %q: %w", ref.WithoutDigest(), err)
	}
	tctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	desc, err := r.puller.Get(tctx, tag)
	if err != nil {
		return Digests{}, r.classify(ref, err)
	}
	var d Digests
	if !desc.MediaType.IsIndex() {
		img, err := desc.Image()
		if err != nil {
			return Digests{}, fmt.Errorf("describing %q: %w", ref.WithoutDigest(), err)
		}
		cfg, err := img.ConfigName()
		if err != nil {
			return Digests{}, fmt.Errorf("describing %q: reading its config: %w", ref.WithoutDigest(), err)
		}
		d.Manifests, d.Configs = []string{desc.Digest.String()}, []string{cfg.String()}
		return d, nil
	}
	d.Index = desc.Digest.String()
	idx, err := desc.ImageIndex()
	if err != nil {
		return Digests{}, fmt.Errorf("describing %q: %w", ref.WithoutDigest(), err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return Digests{}, fmt.Errorf("describing %q: reading its index: %w", ref.WithoutDigest(), err)
	}
	for i, m := range im.Manifests {
		if i == maxPlatforms {
			break
		}
		if !m.MediaType.IsImage() {
			continue
		}
		d.Manifests = append(d.Manifests, m.Digest.String())
		dig := tag.Context().Digest(m.Digest.String())
		child, err := r.puller.Get(tctx, dig)
		if err != nil {
			return Digests{}, r.classify(ref, err)
		}
		img, err := child.Image()
		if err != nil {
			return Digests{}, fmt.Errorf("describing %q: platform manifest %s: %w", ref.WithoutDigest(), m.Digest, err)
		}
		cfg, err := img.ConfigName()
		if err != nil {
			return Digests{}, fmt.Errorf("describing %q: platform manifest %s: %w", ref.WithoutDigest(), m.Digest, err)
		}
		d.Configs = append(d.Configs, cfg.String())
	}
	return d, nil
}

// Serves reports whether ref's repository still serves the manifest or index digest: true when
// it does, false when the registry says it does not (404), an error when it cannot be asked.
// A digest-pinned pod may need the registry to start (KEP-2535 re-verifies pull credentials;
// a new node has no cache), so a pin the registry deleted is a pod that cannot start.
func (r *Resolver) Serves(ctx context.Context, ref Reference, digest string) (bool, error) {
	dig, err := name.NewDigest(ref.Registry+"/"+ref.Repository+"@"+digest, r.nameOpts(ref)...)
	if err != nil {
		return false, fmt.Errorf("checking %s@%s: %w", ref.Name(), digest, err)
	}
	tctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	_, err = r.puller.Head(tctx, dig)
	if err == nil {
		return true, nil
	}
	if headFallback(err) {
		_, gerr := r.puller.Get(tctx, dig)
		if gerr == nil {
			return true, nil
		}
		err = gerr
	}
	if ctx.Err() != nil {
		return false, fmt.Errorf("checking %s@%s: %w", ref.Name(), Short(digest), ctx.Err())
	}
	cerr := r.classify(ref, err)
	if errors.Is(cerr, ErrNotFound) {
		return false, nil
	}
	var re *resolveError
	if errors.As(cerr, &re) {
		re.msg = strings.Replace(re.msg, fmt.Sprintf("resolving %q", ref.WithoutDigest()), fmt.Sprintf("checking %s@%s", ref.Name(), Short(digest)), 1)
	}
	return false, cerr
}

// nameOpts lets go-containerregistry fall back to plain HTTP where the policy allows it.
func (r *Resolver) nameOpts(ref Reference) []name.Option {
	if r.plainHTTPAllowed(ref.Registry) {
		return []name.Option{name.Insecure}
	}
	return nil
}

// Short abbreviates a digest to 12 hex digits for messages, the way docker and crane do.
func Short(digest string) string { return short(digest) }

// IsBareImageID reports whether an imageID names no repository: a bare "sha256:…", which is
// what runtimes report for an image loaded into the node rather than pulled, or an image ID.
func IsBareImageID(imageID string) bool {
	s := imageID
	if _, rest, ok := strings.Cut(s, "://"); ok {
		s = rest
	}
	if strings.ContainsRune(s, '@') {
		return false
	}
	_, err := v1.NewHash(s)
	return err == nil
}
