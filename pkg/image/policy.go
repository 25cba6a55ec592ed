package image

import "fmt"

// Pull policies as written in a container's imagePullPolicy.
const (
	PullAlways       = "Always"
	PullIfNotPresent = "IfNotPresent"
	PullNever        = "Never"
)

// EffectivePullPolicy returns the imagePullPolicy the API server stores for a
// container: the written one, else Kubernetes' default, which is Always only for the
// tag "latest", written or implied (k8s.io/kubernetes pkg/apis/core/v1 defaults.go).
// A digest does not change that: "app:latest@sha256:…" still defaults to Always,
// "app@sha256:…" to IfNotPresent.
func EffectivePullPolicy(ref Reference, written string) string {
	switch {
	case written != "":
		return written
	case ref.Tag == "latest":
		return PullAlways
	default:
		return PullIfNotPresent
	}
}

// ValidPullPolicy checks a user-supplied pull policy before it reaches a patch, where
// the API server's rejection would be harder to read.
func ValidPullPolicy(s string) error {
	switch s {
	case PullAlways, PullIfNotPresent, PullNever:
		return nil
	}
	return fmt.Errorf("invalid image pull policy %q: use %s, %s or %s", s, PullAlways, PullIfNotPresent, PullNever)
}

// Verdict says how the image running in a workload's pods relates to what its tag
// serves in the registry.
type Verdict string

// Verdicts, from best to worst knowledge.
const (
	// VerdictPinned: the spec pins the digest the tag serves and every pod runs it.
	VerdictPinned Verdict = "pinned"
	// VerdictCurrent: not pinned, but every pod runs the digest the tag serves.
	VerdictCurrent Verdict = "current"
	// VerdictStale: pods run, or the spec pins, a digest the tag no longer serves.
	VerdictStale Verdict = "stale"
	// VerdictMixed: replicas run different digests.
	VerdictMixed Verdict = "mixed"
	// VerdictUnknown: the registry could not be asked, or nothing runs to compare with.
	VerdictUnknown Verdict = "unknown"
)

// VerdictInput is what Evaluate compares; all digests are "sha256:…" strings.
type VerdictInput struct {
	// SpecDigest is the digest pinned in the pod template's image, "" if none.
	SpecDigest string
	// RegistryDigest is what the tag resolves to now.
	RegistryDigest string
	// RegistryErr is the error resolving the tag; non-nil makes the verdict unknown.
	RegistryErr error
	// PodDigests holds one ImageIDDigest per running pod; "" (no imageID yet) is ignored. A
	// digest that names the same bytes as RegistryDigest another way (platform manifest,
	// config; see Digests.Match) must be given as RegistryDigest.
	PodDigests []string
	// Unplaced counts running digests that match nothing the registry serves (MatchNone):
	// the verdict is then unknown, never stale.
	Unplaced int
}

// Cluster is what the notes must know of the cluster and the workload to be true for them.
type Cluster struct {
	// Minor is the API server's Kubernetes minor version (1.Minor); 0 when unknown.
	Minor int
	// PullSecrets reports that the workload's pods pull with secrets: the pod template's
	// imagePullSecrets or its service account's.
	PullSecrets bool
}

// ensureSecretPulledMinor is the release from which the kubelet re-pulls, by default, an image
// that the pod's credentials have not pulled on its node (KEP-2535,
// KubeletEnsureSecretPulledImages, beta and on by default since 1.35).
const ensureSecretPulledMinor = 35

// RepullsForCredentials reports that, on this cluster, a new pod with pull secrets re-pulls an
// IfNotPresent image its credentials have not pulled on its node before.
func (c Cluster) RepullsForCredentials() bool {
	return c.PullSecrets && c.Minor >= ensureSecretPulledMinor
}

// Evaluate decides the Verdict. Mixed wins over pinned and current because a rollout
// in progress or a node with a stale cache is the first thing a user must know.
func Evaluate(in VerdictInput) Verdict {
	if in.RegistryErr != nil || in.RegistryDigest == "" || in.Unplaced > 0 {
		return VerdictUnknown
	}
	running := ""
	for _, d := range in.PodDigests {
		switch {
		case d == "":
		case running == "":
			running = d
		case d != running:
			return VerdictMixed
		}
	}
	switch {
	case in.SpecDigest != "":
		if in.SpecDigest == in.RegistryDigest && (running == "" || running == in.SpecDigest) {
			return VerdictPinned
		}
		return VerdictStale
	case running == "":
		return VerdictUnknown
	case running == in.RegistryDigest:
		return VerdictCurrent
	default:
		return VerdictStale
	}
}

// Notes returns one-line hints on why pods may run other bytes than their tag
// serves, given the image as written in the spec, its written imagePullPolicy,
// what Evaluate compared and the cluster the pods run on.
func Notes(ref Reference, writtenPolicy string, in VerdictInput, cl Cluster) []string {
	var notes []string
	pinned := in.SpecDigest != ""
	switch policy := EffectivePullPolicy(ref, writtenPolicy); {
	case policy == PullNever:
		notes = append(notes, "imagePullPolicy Never: nodes run whatever they have cached; load the new image onto every node (kind load, minikube image load)")
	case pinned:
	case policy == PullIfNotPresent && cl.RepullsForCredentials():
		notes = append(notes, fmt.Sprintf("mutable tag %q with imagePullPolicy IfNotPresent and pull secrets on Kubernetes 1.%d: a new pod whose credentials have not pulled the image on its node pulls the tag again (KEP-2535), so replicas can end up on different digests; pin the digest with refresh", ref.Tag, cl.Minor))
	case policy == PullIfNotPresent:
		notes = append(notes, fmt.Sprintf("mutable tag %q with imagePullPolicy IfNotPresent: a node that already has the image never pulls the moved tag; pin the digest with refresh", ref.Tag))
	case policy == PullAlways:
		notes = append(notes, "imagePullPolicy Always on a mutable tag: replicas may run different bytes after restarts; pin the digest with refresh")
	}
	switch Evaluate(in) {
	case VerdictMixed:
		why := "a rollout is in progress or nodes cached different images"
		if cl.RepullsForCredentials() && !pinned {
			why = "a rollout is in progress, nodes cached different images, or pods whose pull credentials had not pulled the image pulled the moved tag again"
		}
		notes = append(notes, "replicas run different digests: "+why+"; pin the digest with refresh")
	case VerdictStale:
		if in.SpecDigest != "" && in.SpecDigest != in.RegistryDigest {
			notes = append(notes, fmt.Sprintf("the spec pins %s but the tag now serves %s: run refresh to pin it", short(in.SpecDigest), short(in.RegistryDigest)))
		} else if in.SpecDigest != "" {
			notes = append(notes, "the spec pins the digest the tag serves but pods still run another: wait for the rollout")
		}
	}
	return notes
}

// short abbreviates a digest for messages the way docker and crane do.
func short(digest string) string {
	if len(digest) > len("sha256:")+12 {
		return digest[:len("sha256:")+12]
	}
	return digest
}
