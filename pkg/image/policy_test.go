package image

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func mustParse(t *testing.T, s string) Reference {
	t.Helper()
	ref, err := ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func TestEffectivePullPolicy(t *testing.T) {
	tests := []struct{ image, written, want string }{
		{"nginx", "", PullAlways},
		{"nginx:latest", "", PullAlways},
		{"nginx:1.27", "", PullIfNotPresent},
		{"nginx@" + digestA, "", PullIfNotPresent},
		// Kubernetes looks at the tag only: an explicit latest stays Always even when pinned.
		{"nginx:latest@" + digestA, "", PullAlways},
		{"nginx:1.27@" + digestA, "", PullIfNotPresent},
		{"nginx", PullNever, PullNever},
		{"nginx:1.27", PullAlways, PullAlways},
	}
	for _, tt := range tests {
		t.Run(tt.image+"/"+tt.written, func(t *testing.T) {
			if got := EffectivePullPolicy(mustParse(t, tt.image), tt.written); got != tt.want {
				t.Errorf("EffectivePullPolicy(%q, %q) = %q, want %q", tt.image, tt.written, got, tt.want)
			}
		})
	}
}

func TestValidPullPolicy(t *testing.T) {
	for _, ok := range []string{PullAlways, PullIfNotPresent, PullNever} {
		if err := ValidPullPolicy(ok); err != nil {
			t.Errorf("ValidPullPolicy(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "always", "IfNotPresent ", "Sometimes"} {
		err := ValidPullPolicy(bad)
		if err == nil || !strings.Contains(err.Error(), "Always, IfNotPresent or Never") {
			t.Errorf("ValidPullPolicy(%q) = %v, want an error listing the valid policies", bad, err)
		}
	}
}

func TestEvaluate(t *testing.T) {
	tests := []struct {
		name string
		in   VerdictInput
		want Verdict
	}{
		{"registry error", VerdictInput{RegistryErr: errors.New("boom"), PodDigests: []string{digestA}}, VerdictUnknown},
		{"registry error wins over mixed", VerdictInput{RegistryErr: ErrUnauthorized, PodDigests: []string{digestA, digestB}}, VerdictUnknown},
		{"no registry digest", VerdictInput{PodDigests: []string{digestA}}, VerdictUnknown},
		{"mixed", VerdictInput{RegistryDigest: digestA, PodDigests: []string{digestA, digestB}}, VerdictMixed},
		{"mixed even when pinned", VerdictInput{SpecDigest: digestA, RegistryDigest: digestA, PodDigests: []string{digestA, digestB}}, VerdictMixed},
		{"current", VerdictInput{RegistryDigest: digestA, PodDigests: []string{digestA, digestA}}, VerdictCurrent},
		{"current ignores pods without imageID", VerdictInput{RegistryDigest: digestA, PodDigests: []string{"", digestA, ""}}, VerdictCurrent},
		{"stale: tag moved", VerdictInput{RegistryDigest: digestB, PodDigests: []string{digestA}}, VerdictStale},
		{"no pods, not pinned", VerdictInput{RegistryDigest: digestA}, VerdictUnknown},
		{"only pods without imageID", VerdictInput{RegistryDigest: digestA, PodDigests: []string{"", ""}}, VerdictUnknown},
		{"pinned", VerdictInput{SpecDigest: digestA, RegistryDigest: digestA, PodDigests: []string{digestA}}, VerdictPinned},
		{"pinned, no pods", VerdictInput{SpecDigest: digestA, RegistryDigest: digestA}, VerdictPinned},
		{"pinned to an older digest", VerdictInput{SpecDigest: digestA, RegistryDigest: digestB, PodDigests: []string{digestA}}, VerdictStale},
		{"pinned to an older digest, no pods", VerdictInput{SpecDigest: digestA, RegistryDigest: digestB}, VerdictStale},
		{"pinned but pods lag", VerdictInput{SpecDigest: digestB, RegistryDigest: digestB, PodDigests: []string{digestA}}, VerdictStale},
		// A running digest the registry cannot place is never called stale.
		{"unplaced digest", VerdictInput{RegistryDigest: digestB, PodDigests: []string{digestA}, Unplaced: 1}, VerdictUnknown},
		{"unplaced wins over mixed", VerdictInput{RegistryDigest: digestB, PodDigests: []string{digestA, digestB}, Unplaced: 1}, VerdictUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Evaluate(tt.in); got != tt.want {
				t.Errorf("Evaluate(%+v) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNotes(t *testing.T) {
	tests := []struct {
		name, image, policy string
		in                  VerdictInput
		cl                  Cluster
		want                []string // substrings, one per expected note, in order
	}{
		{"tag with IfNotPresent", "app:dev", "", VerdictInput{RegistryDigest: digestA, PodDigests: []string{digestA}}, Cluster{},
			[]string{`mutable tag "dev" with imagePullPolicy IfNotPresent`}},
		{"implicit latest is Always", "app", "", VerdictInput{RegistryDigest: digestA, PodDigests: []string{digestA}}, Cluster{},
			[]string{"imagePullPolicy Always on a mutable tag"}},
		{"Never", "app:dev", PullNever, VerdictInput{RegistryDigest: digestA, PodDigests: []string{digestA}}, Cluster{},
			[]string{"imagePullPolicy Never"}},
		{"pinned and current: nothing to say", "app:dev@" + digestA, "", VerdictInput{SpecDigest: digestA, RegistryDigest: digestA, PodDigests: []string{digestA}}, Cluster{},
			nil},
		{"pinned to an older digest", "app:dev@" + digestA, "", VerdictInput{SpecDigest: digestA, RegistryDigest: digestB, PodDigests: []string{digestA}}, Cluster{},
			[]string{"the spec pins sha256:aaaaaaaaaaaa but the tag now serves sha256:bbbbbbbbbbbb"}},
		{"pinned, rollout pending", "app:dev@" + digestB, "", VerdictInput{SpecDigest: digestB, RegistryDigest: digestB, PodDigests: []string{digestA}}, Cluster{},
			[]string{"wait for the rollout"}},
		{"mixed", "app:dev", PullAlways, VerdictInput{RegistryDigest: digestA, PodDigests: []string{digestA, digestC}}, Cluster{},
			[]string{"imagePullPolicy Always", "replicas run different digests"}},
		// KEP-2535: from 1.35 a pod with pull secrets re-pulls what its credentials never pulled.
		{"IfNotPresent with pull secrets on 1.37", "app:dev", "", VerdictInput{RegistryDigest: digestA, PodDigests: []string{digestA}}, Cluster{Minor: 37, PullSecrets: true},
			[]string{"a new pod whose credentials have not pulled the image on its node pulls the tag again (KEP-2535)"}},
		{"IfNotPresent with pull secrets on 1.34", "app:dev", "", VerdictInput{RegistryDigest: digestA, PodDigests: []string{digestA}}, Cluster{Minor: 34, PullSecrets: true},
			[]string{"a node that already has the image never pulls the moved tag"}},
		{"IfNotPresent without pull secrets on 1.37", "app:dev", "", VerdictInput{RegistryDigest: digestA, PodDigests: []string{digestA}}, Cluster{Minor: 37},
			[]string{"a node that already has the image never pulls the moved tag"}},
		{"mixed with pull secrets on 1.37", "app:dev", "", VerdictInput{RegistryDigest: digestA, PodDigests: []string{digestA, digestC}}, Cluster{Minor: 37, PullSecrets: true},
			[]string{"KEP-2535", "pulled the moved tag again"}},
		{"pinned with pull secrets: nothing to say", "app:dev@" + digestA, "", VerdictInput{SpecDigest: digestA, RegistryDigest: digestA, PodDigests: []string{digestA}}, Cluster{Minor: 37, PullSecrets: true},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Notes(mustParse(t, tt.image), tt.policy, tt.in, tt.cl)
			ok := len(got) == len(tt.want)
			for i := 0; ok && i < len(got); i++ {
				ok = strings.Contains(got[i], tt.want[i])
			}
			if !ok {
				t.Errorf("Notes = %q, want notes containing %q", got, tt.want)
			}
			if slices.ContainsFunc(got, func(n string) bool { return strings.Contains(n, "\n") }) {
				t.Errorf("Notes = %q: each note must be one line", got)
			}
		})
	}
}
