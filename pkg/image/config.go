package image

import (
	"context"
	"fmt"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Entrypoint returns the entrypoint and cmd of image (as a pod spec writes it) from its
// registry's config blob: what a container runs when its pod sets no command. For a
// multi-platform image it reads linux on this machine's architecture, else the index's first
// linux image: entrypoints do not differ between platforms in practice.
func (r *Resolver) Entrypoint(ctx context.Context, img string) (entrypoint, cmd []string, err error) {
	ref, err := ParseReference(img)
	if err != nil {
		return nil, nil, err
	}
	var opts []name.Option
	if r.plainHTTPAllowed(ref.Registry) {
		opts = append(opts, name.Insecure)
	}
	target := ref.Registry + "/" + ref.Repository
	switch {
	case ref.Digest != "":
		target += "@" + ref.Digest
	default:
		target += ":" + ref.Tag
	}
	nref, err := name.ParseReference(target, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the config of %q: %w", img, err)
	}
	tctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	desc, err := r.puller.Get(tctx, nref)
	if err != nil {
		return nil, nil, r.classify(ref, err)
	}
	var im v1.Image
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, nil, fmt.Errorf("reading the index of %q: %w", img, err)
		}
		if im, err = pickLinux(idx); err != nil {
			return nil, nil, fmt.Errorf("reading the index of %q: %w", img, err)
		}
	} else if im, err = desc.Image(); err != nil {
		return nil, nil, fmt.Errorf("reading the manifest of %q: %w", img, err)
	}
	cfg, err := im.ConfigFile()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the config of %q: %w", img, err)
	}
	return cfg.Config.Entrypoint, cfg.Config.Cmd, nil
}

// pickLinux returns idx's linux image for this machine's architecture, else its first linux one.
func pickLinux(idx v1.ImageIndex) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var first *v1.Descriptor
	for i, d := range m.Manifests {
		if d.Platform == nil || d.Platform.OS != "linux" {
			continue
		}
		if d.Platform.Architecture == runtime.GOARCH {
			return idx.Image(d.Digest)
		}
		if first == nil {
			first = &m.Manifests[i]
		}
	}
	if first == nil {
		return nil, fmt.Errorf("no linux image in it")
	}
	return idx.Image(first.Digest)
}
