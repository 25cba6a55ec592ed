package registrytest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// AppendFile pulls the image base (anonymously, plain HTTP allowed), appends a layer holding
// data at file (absolute, mode 0755), pushes the result as dst and returns its digest: what a
// Dockerfile's `COPY server /app/server` on top of base does, for the benchmarks' rebuild
// baseline (go-containerregistry stays inside pkg/image).
func AppendFile(ctx context.Context, base, dst, file string, data []byte) (string, error) {
	bref, err := name.ParseReference(base, name.Insecure)
	if err != nil {
		return "", err
	}
	dref, err := name.ParseReference(dst, name.Insecure)
	if err != nil {
		return "", err
	}
	img, err := remote.Image(bref, remote.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("pulling %s: %w", base, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	rel := strings.TrimPrefix(file, "/")
	if dir := path.Dir(rel); dir != "." {
		if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			return "", err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: rel, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data))}); err != nil {
		return "", err
	}
	if _, err := tw.Write(data); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return "", err
	}
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return "", err
	}
	if err := remote.Write(dref, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("pushing %s: %w", dst, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}
