package image

import (
	"strings"
	"testing"
)

var (
	digestA = "sha256:" + strings.Repeat("a", 64)
	digestB = "sha256:" + strings.Repeat("b", 64)
	digestC = "sha256:" + strings.Repeat("c", 64)
)

func TestParseReference(t *testing.T) {
	tests := []struct {
		in   string
		want Reference
	}{
		{"nginx", Reference{Registry: "docker.io", Repository: "library/nginx", Tag: "latest", ImplicitTag: true}},
		{"nginx:1.27", Reference{Registry: "docker.io", Repository: "library/nginx", Tag: "1.27"}},
		{"docker.io/nginx", Reference{Registry: "docker.io", Repository: "library/nginx", Tag: "latest", ImplicitTag: true}},
		{"index.docker.io/library/nginx:1", Reference{Registry: "docker.io", Repository: "library/nginx", Tag: "1"}},
		{"bitnami/redis:7", Reference{Registry: "docker.io", Repository: "bitnami/redis", Tag: "7"}},
		{"ghcr.io/org/team/app:dev", Reference{Registry: "ghcr.io", Repository: "org/team/app", Tag: "dev"}},
		{"127.0.0.1:5000/app", Reference{Registry: "127.0.0.1:5000", Repository: "app", Tag: "latest", ImplicitTag: true}},
		{"localhost:5000/team/app:v1", Reference{Registry: "localhost:5000", Repository: "team/app", Tag: "v1"}},
		{"[::1]:5000/app:dev", Reference{Registry: "[::1]:5000", Repository: "app", Tag: "dev"}},
		{"127.0.0.1:5000/app:dev@" + digestA, Reference{Registry: "127.0.0.1:5000", Repository: "app", Tag: "dev", Digest: digestA}},
		{"nginx@" + digestA, Reference{Registry: "docker.io", Repository: "library/nginx", Digest: digestA}},
		{"nginx:latest@" + digestA, Reference{Registry: "docker.io", Repository: "library/nginx", Tag: "latest", Digest: digestA}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseReference(tt.in)
			if err != nil {
				t.Fatalf("ParseReference(%q): %v", tt.in, err)
			}
			tt.want.Written = tt.in
			if got != tt.want {
				t.Errorf("ParseReference(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseReferenceInvalid(t *testing.T) {
	for _, in := range []string{
		"",
		"Nginx",
		"ghcr.io/Org/app",
		"nginx:",
		"nginx:bad tag",
		"nginx@sha256:abc",
		"nginx@md5:" + strings.Repeat("a", 32),
		"nginx@" + strings.ToUpper(digestA),
		"nginx@" + digestA + "@" + digestB,
	} {
		t.Run(in, func(t *testing.T) {
			if got, err := ParseReference(in); err == nil {
				t.Errorf("ParseReference(%q) = %+v, want an error", in, got)
			}
		})
	}
}

func TestReferenceForms(t *testing.T) {
	tests := []struct {
		in, withDigest, withoutDigest, name string
	}{
		{"nginx", "nginx:latest@" + digestB, "nginx", "docker.io/library/nginx"},
		{"nginx:1.27", "nginx:1.27@" + digestB, "nginx:1.27", "docker.io/library/nginx"},
		{"nginx@" + digestA, "nginx@" + digestB, "nginx", "docker.io/library/nginx"},
		{"127.0.0.1:5000/app:dev@" + digestA, "127.0.0.1:5000/app:dev@" + digestB, "127.0.0.1:5000/app:dev", "127.0.0.1:5000/app"},
		{"index.docker.io/library/nginx:1", "index.docker.io/library/nginx:1@" + digestB, "index.docker.io/library/nginx:1", "docker.io/library/nginx"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ref, err := ParseReference(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := ref.WithDigest(digestB); got != tt.withDigest {
				t.Errorf("WithDigest = %q, want %q", got, tt.withDigest)
			}
			if got := ref.WithoutDigest(); got != tt.withoutDigest {
				t.Errorf("WithoutDigest = %q, want %q", got, tt.withoutDigest)
			}
			if got := ref.Name(); got != tt.name {
				t.Errorf("Name = %q, want %q", got, tt.name)
			}
			// The pinned form must parse back to the same tag, or refresh could not follow it.
			back, err := ParseReference(ref.WithDigest(digestB))
			if err != nil || back.Tag != ref.Tag || back.Digest != digestB {
				t.Errorf("ParseReference(WithDigest) = %+v, %v; want tag %q, digest %q", back, err, ref.Tag, digestB)
			}
		})
	}
}

func TestImageIDDigest(t *testing.T) {
	tests := []struct{ in, want string }{
		{"docker-pullable://nginx@" + digestA, digestA},
		{"docker-pullable://127.0.0.1:5000/app@" + digestA, digestA},
		{"docker://" + digestA, digestA},
		{"cri-o://quay.io/app@" + digestA, digestA},
		{"docker.io/library/nginx@" + digestA, digestA},
		{"127.0.0.1:5000/app@" + digestA, digestA},
		{digestA, digestA},
		{"", ""},
		{"docker-pullable://nginx:latest", ""},
		{"sha256:abc", ""},
		{"nginx@sha256:xyz", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := ImageIDDigest(tt.in); got != tt.want {
				t.Errorf("ImageIDDigest(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
