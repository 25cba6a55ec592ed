// Package inspect builds the per-image report of a workload: what the spec says, what each pod
// runs, what the registry serves now, and the verdict, for every container and image volume.
// Its JSON form is a stable contract documented in docs/images.md. PlanRefresh turns the report
// into refresh's decision: which images moved, what digest to pin, or that only the rollout is
// behind.
package inspect

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/livesync-dev/kubectl-livesync/pkg/image"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// Resolver is what inspect asks a registry.
type Resolver interface {
	// Resolve returns the digest ref's tag serves now (one HEAD).
	Resolve(ctx context.Context, ref image.Reference) (string, error)
	// Describe returns the tag's index, platform manifest and config digests; asked only when
	// a pod runs a digest other than Resolve's.
	Describe(ctx context.Context, ref image.Reference) (image.Digests, error)
	// Serves reports whether ref's repository still serves a manifest or index digest.
	Serves(ctx context.Context, ref image.Reference, digest string) (bool, error)
	// IsIndex reports whether Resolve found digest to be a multi-platform index.
	IsIndex(digest string) bool
}

// Report is the inspect result for one workload.
type Report struct {
	Workload   Ref         `json:"workload"`
	Containers []Container `json:"containers"`
	// ImageVolumes are the template's image volumes (spec.volumes[].image), reported like
	// containers; absent when it has none.
	ImageVolumes []Container `json:"imageVolumes,omitempty"`
	// ServerVersion is the API server's version (discovery), when known.
	ServerVersion string `json:"serverVersion,omitempty"`
	// PullSecrets are the secrets the pods pull with: the template's imagePullSecrets, then its
	// service account's.
	PullSecrets []string `json:"pullSecrets,omitempty"`
	// Owner is the tool that manages the workload (Helm, Argo CD, Flux), what it does to a
	// field livesync changes and how to hold it; absent when no tool's mark or manager says.
	Owner *workload.Owner `json:"owner,omitempty"`
}

// Reverted is a field livesync set that another writer put back to its original.
type Reverted struct {
	Field   string `json:"field"`
	Manager string `json:"manager,omitempty"`
	Set     string `json:"set"`
}

// Ref names a workload.
type Ref struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Container is the report of one container, or of one image volume, of the pod template.
type Container struct {
	Name                string             `json:"name"`
	Init                bool               `json:"init"`
	Image               string             `json:"image"`
	Registry            string             `json:"registry"`
	Repository          string             `json:"repository"`
	Tag                 string             `json:"tag"`
	PinnedDigest        string             `json:"pinnedDigest"`
	PullPolicy          string             `json:"pullPolicy"`
	EffectivePullPolicy string             `json:"effectivePullPolicy"`
	RegistryDigest      string             `json:"registryDigest"`
	RegistryError       string             `json:"registryError"`
	Pods                []Pod              `json:"pods"`
	Verdict             image.Verdict      `json:"verdict"`
	Original            *workload.Original `json:"original"`
	// Managers are, per field livesync writes ("image", "imagePullPolicy"), the managedFields
	// entries that own it: the writers the next server-side apply of the field must agree with.
	Managers map[string][]workload.FieldOwner `json:"managers,omitempty"`
	// Reverted are the fields livesync set that another writer put back to the original,
	// e.g. {"field": "image", "manager": "kustomize-controller"}: the pin no longer holds.
	Reverted []Reverted `json:"reverted,omitempty"`
	Notes    []string   `json:"notes"`
	// RegistryDigests are the tag's index, platform manifest and config digests, read when a
	// pod runs a digest other than RegistryDigest.
	RegistryDigests *image.Digests `json:"registryDigests,omitempty"`

	// Spec is the container as the template has it; Ref the parsed image; RegistryErr the
	// resolve error, for callers that decide on it.
	Spec        workload.Container `json:"-"`
	Ref         image.Reference    `json:"-"`
	RegistryErr error              `json:"-"`
}

// Pod is what one pod's container (or image volume) runs.
type Pod struct {
	Name     string `json:"name"`
	Node     string `json:"node"`
	Digest   string `json:"digest"`
	Ready    bool   `json:"ready"`
	Restarts int32  `json:"restarts"`
	// ImageID is the runtime's imageID as the pod status reports it (for an image volume its
	// imageRef, reported behind the ImageVolumeWithDigest feature gate).
	ImageID string `json:"imageID,omitempty"`
	// Match says which registry digest Digest is: image.MatchIndex, MatchManifest,
	// MatchConfig, MatchOlder (one the tag moved away from) or MatchNone.
	Match string `json:"match,omitempty"`
	// Pull is how the image got onto the pod's node, as the kubelet's events said while they
	// last: "pulled" or "already present".
	Pull string `json:"pull,omitempty"`
}

// Options are what Build needs to know beyond the workload.
type Options struct {
	// ServerVersion is the API server's gitVersion, e.g. "v1.37.2"; "" when unknown.
	ServerVersion string
}

// Build reads the workload's pods, its pull secrets and its pods' pull events, and asks the
// registry once per distinct image, in parallel. images are the containers and image volumes to
// report (workload.Images).
func Build(ctx context.Context, client kubernetes.Interface, res Resolver, w *workload.Workload, images []workload.Container, opts Options) (*Report, error) {
	pods, err := w.Pods(ctx, client)
	if err != nil {
		return nil, err
	}
	orig, err := w.Originals()
	if err != nil {
		return nil, err
	}
	rep := &Report{Workload: Ref{Kind: w.Kind, Namespace: w.Namespace, Name: w.Name}, Containers: []Container{}, ServerVersion: opts.ServerVersion}
	rep.PullSecrets = w.AllPullSecrets(ctx, client)
	rep.Owner = w.Owner(images)
	cluster := image.Cluster{Minor: minorOf(opts.ServerVersion), PullSecrets: len(rep.PullSecrets) > 0}
	pulls := pullEvents(ctx, client, w.Namespace, pods)

	type result struct {
		digest string
		err    error
	}
	results := map[string]*result{}
	var wg sync.WaitGroup
	var all []Container
	for _, c := range images {
		cr := Container{Name: c.Name, Init: c.Init, Image: c.Image, PullPolicy: c.PullPolicy, Pods: []Pod{}, Notes: []string{}, Spec: c}
		ref, perr := image.ParseReference(c.Image)
		if perr != nil {
			cr.RegistryError = perr.Error()
			cr.RegistryErr = perr
		} else {
			cr.Ref = ref
			cr.Registry, cr.Repository, cr.Tag, cr.PinnedDigest = ref.Registry, ref.Repository, ref.Tag, ref.Digest
			cr.EffectivePullPolicy = image.EffectivePullPolicy(ref, c.PullPolicy)
			key := ref.WithoutDigest()
			if _, ok := results[key]; !ok && ref.Tag != "" {
				r := &result{}
				results[key] = r
				wg.Add(1)
				go func() {
					defer wg.Done()
					r.digest, r.err = res.Resolve(ctx, ref)
				}()
			}
		}
		if o, ok := orig[c.Key()]; ok {
			cr.Original = &o
			cr.Reverted = reverted(w, c, o)
		}
		for _, f := range []string{workload.FieldImage, workload.FieldPullPolicy} {
			if owners := w.FieldOwners(c, f); len(owners) > 0 {
				if cr.Managers == nil {
					cr.Managers = map[string][]workload.FieldOwner{}
				}
				cr.Managers[f] = owners
			}
		}
		for i := range pods {
			p := &pods[i]
			if p.DeletionTimestamp != nil {
				continue
			}
			pr := Pod{Name: p.Name, Node: p.Spec.NodeName, Pull: pulls[pullKey{p.Name, c.Image}]}
			if c.Volume {
				pr.ImageID, pr.Ready = volumeImageRef(p, c.Name), podReady(p)
			} else if st := workload.ContainerStatus(p, c.Name, c.Init); st != nil {
				pr.ImageID, pr.Ready, pr.Restarts = st.ImageID, st.Ready, st.RestartCount
			}
			pr.Digest = image.ImageIDDigest(pr.ImageID)
			cr.Pods = append(cr.Pods, pr)
		}
		all = append(all, cr)
	}
	wg.Wait()
	described := map[string]describeResult{}
	for i := range all {
		c := &all[i]
		if c.RegistryErr != nil {
			c.Verdict = image.VerdictUnknown
			continue
		}
		if c.Ref.Tag == "" {
			// Digest-only: nothing can move, the pinned digest is what the registry serves.
			c.RegistryDigest = c.Ref.Digest
		} else if r := results[c.Ref.WithoutDigest()]; r.err != nil {
			c.RegistryErr = r.err
			c.RegistryError = r.err.Error()
		} else {
			c.RegistryDigest = r.digest
		}
		in := image.VerdictInput{SpecDigest: c.PinnedDigest, RegistryDigest: c.RegistryDigest, RegistryErr: c.RegistryErr}
		if c.RegistryErr == nil {
			c.Notes = append(c.Notes, c.match(ctx, res, described)...)
			for _, p := range c.Pods {
				switch p.Match {
				case image.MatchIndex, image.MatchManifest, image.MatchConfig:
					in.PodDigests = append(in.PodDigests, c.RegistryDigest)
				case image.MatchNone:
					in.Unplaced++
				default:
					in.PodDigests = append(in.PodDigests, p.Digest)
				}
			}
		}
		c.Verdict = image.Evaluate(in)
		c.Notes = append(c.Notes, image.Notes(c.Ref, c.PullPolicy, in, cluster)...)
		if c.unreported() {
			c.Notes = append(c.Notes, "no pod reports the digest this image volume mounts (status.containerStatuses[].volumeMounts[].volumeStatus.image needs the ImageVolumeWithDigest feature gate, and the 1.37 kubelet leaves it empty even with it on): refresh pins it to what the tag serves, so that it is known")
		}
	}
	for _, c := range all {
		if c.Spec.Volume {
			rep.ImageVolumes = append(rep.ImageVolumes, c)
		} else {
			rep.Containers = append(rep.Containers, c)
		}
	}
	return rep, nil
}

// describeResult caches one Describe per image.
type describeResult struct {
	d   image.Digests
	err error
}

// match places each pod's running digest against what the registry serves, and returns the
// notes that say why a digest cannot be placed. The tag's digest itself needs no request;
// anything else is compared with the tag's index, platform manifest and config digests
// (one Describe per image), and then asked of the repository (one HEAD per digest): a digest
// it still serves is one the tag moved away from; one it does not is unknown, never stale.
func (c *Container) match(ctx context.Context, res Resolver, described map[string]describeResult) []string {
	var notes []string
	older := map[string]string{}
	for i := range c.Pods {
		p := &c.Pods[i]
		switch p.Digest {
		case "":
			continue
		case c.RegistryDigest:
			p.Match = image.MatchManifest
			if res.IsIndex(p.Digest) {
				p.Match = image.MatchIndex
			}
			continue
		}
		if c.Ref.Tag == "" {
			continue // a bare digest pin: nothing else to compare with
		}
		key := c.Ref.WithoutDigest()
		dr, ok := described[key]
		if !ok {
			dr.d, dr.err = res.Describe(ctx, c.Ref)
			described[key] = dr
		}
		if dr.err == nil {
			d := dr.d
			c.RegistryDigests = &d
			if m := d.Match(p.Digest); m != "" {
				p.Match = m
				continue
			}
		}
		if m, ok := older[p.Digest]; ok {
			p.Match = m
			continue
		}
		var served bool
		var err error
		if !image.IsBareImageID(p.ImageID) {
			served, err = res.Serves(ctx, c.Ref, p.Digest)
		}
		switch {
		case err != nil:
			p.Match = image.MatchNone
			notes = append(notes, fmt.Sprintf("pod %s runs %s, which could not be looked up (%v): verdict unknown", p.Name, image.Short(p.Digest), err))
		case served:
			p.Match = image.MatchOlder
		case image.IsBareImageID(p.ImageID):
			p.Match = image.MatchNone
			notes = append(notes, fmt.Sprintf("pod %s runs %s, an imageID that names no repository and matches none of the index, platform manifest and config digests %s serves: an image loaded into the node (ctr import, kind load) or a runtime that reports image IDs; livesync cannot tell whether it is stale", p.Name, image.Short(p.Digest), c.Ref.WithoutDigest()))
		default:
			p.Match = image.MatchNone
			notes = append(notes, fmt.Sprintf("pod %s runs %s, which the registry does not serve (deleted, or pushed elsewhere) and which matches none of the index, platform manifest and config digests %s serves: livesync cannot tell whether it is stale", p.Name, image.Short(p.Digest), c.Ref.WithoutDigest()))
		}
		older[p.Digest] = p.Match
	}
	return notes
}

// Stale reports whether the image should be pinned to its registry digest: the spec pins
// another digest, or some pod runs a digest the tag moved away from. A pod whose digest the
// registry cannot place does not count: it may run the very bytes the tag serves. An image
// volume whose pods report no digest at all is stale unless the spec pins what the tag serves:
// pinning is the only way to know what it mounts.
func (c *Container) Stale() bool {
	if c.RegistryDigest == "" {
		return false
	}
	if c.PinnedDigest != "" && c.PinnedDigest != c.RegistryDigest {
		return true
	}
	if c.unreported() && c.PinnedDigest == "" {
		return true
	}
	for _, p := range c.Pods {
		if p.Digest != "" && p.Digest != c.RegistryDigest && (p.Match == "" || p.Match == image.MatchOlder) {
			return true
		}
	}
	return false
}

// unreported tells an image volume whose pods report no digest it mounts.
func (c *Container) unreported() bool {
	if !c.Spec.Volume || len(c.Pods) == 0 {
		return false
	}
	for _, p := range c.Pods {
		if p.Digest != "" {
			return false
		}
	}
	return true
}

// RunningDigests returns the distinct digests pods run, in pod order.
func (c *Container) RunningDigests() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range c.Pods {
		if p.Digest != "" && !seen[p.Digest] {
			seen[p.Digest] = true
			out = append(out, p.Digest)
		}
	}
	return out
}

// All returns the report's containers and image volumes, in that order.
func (r *Report) All() []*Container {
	out := make([]*Container, 0, len(r.Containers)+len(r.ImageVolumes))
	for i := range r.Containers {
		out = append(out, &r.Containers[i])
	}
	for i := range r.ImageVolumes {
		out = append(out, &r.ImageVolumes[i])
	}
	return out
}

// volumeImageRef returns the imageRef the pod's status reports for image volume name: any
// container's volumeMounts[].volumeStatus.image (behind the ImageVolumeWithDigest gate).
func volumeImageRef(p *corev1.Pod, name string) string {
	for _, sts := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, st := range sts {
			for _, vm := range st.VolumeMounts {
				if vm.Name == name && vm.VolumeStatus != nil && vm.VolumeStatus.Image != nil && vm.VolumeStatus.Image.ImageRef != "" {
					return vm.VolumeStatus.Image.ImageRef
				}
			}
		}
	}
	return ""
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pullKey names the image one pod pulled.
type pullKey struct{ pod, image string }

// pullEvents reads, once per workload, how the kubelet got each pod's images: the last
// "Pulled" event per pod and image, while events last (an hour by default). Reading events
// is optional: without permission, or when they are gone, there is simply no evidence.
func pullEvents(ctx context.Context, client kubernetes.Interface, ns string, pods []corev1.Pod) map[pullKey]string {
	out := map[pullKey]string{}
	if len(pods) == 0 {
		return out
	}
	ours := map[string]bool{}
	for _, p := range pods {
		ours[p.Name] = true
	}
	sel := fields.Set{"involvedObject.kind": "Pod", "reason": "Pulled"}.AsSelector().String()
	list, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return out
	}
	evs := list.Items
	sort.SliceStable(evs, func(i, j int) bool { return eventTime(&evs[i]).Before(eventTime(&evs[j])) })
	for i := range evs {
		ev := &evs[i]
		if !ours[ev.InvolvedObject.Name] || ev.Reason != "Pulled" {
			continue
		}
		img, how := parsePulled(ev.Message)
		if img != "" {
			out[pullKey{ev.InvolvedObject.Name, img}] = how
		}
	}
	return out
}

func eventTime(ev *corev1.Event) time.Time {
	switch {
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case ev.EventTime.Time.IsZero():
		return ev.CreationTimestamp.Time
	}
	return ev.EventTime.Time
}

// parsePulled reads the kubelet's "Pulled" messages (pkg/kubelet/images/image_manager.go):
//
//	Successfully pulled image "IMAGE" in 1.2s (1.2s including waiting). Image size: …
//	Container image "IMAGE" already present on machine
//	Container image "IMAGE" already present on machine and can be accessed by the pod
func parsePulled(msg string) (img, how string) {
	_, rest, ok := strings.Cut(msg, `image "`)
	if !ok {
		return "", ""
	}
	img, rest, ok = strings.Cut(rest, `"`)
	if !ok {
		return "", ""
	}
	// "can be accessed by the pod" is what 1.35+ says whether it checked credentials or its
	// policy let it skip the check (images pulled outside the kubelet): it is no evidence of
	// either, so both read "already present".
	switch {
	case strings.HasPrefix(msg, "Successfully pulled"):
		return img, "pulled"
	case strings.Contains(rest, "already present"):
		return img, "already present"
	}
	return "", ""
}

// minorOf reads the minor version of a gitVersion such as "v1.37.2" or "v1.35.0-gke.1"; 0 when
// it cannot.
func minorOf(v string) int {
	_, rest, ok := strings.Cut(strings.TrimPrefix(v, "v"), ".")
	if !ok {
		return 0
	}
	n := 0
	for _, r := range rest {
		if r < '0' || r > '9' {
			break
		}
		n = n*10 + int(r-'0')
	}
	return n
}

// reverted lists the fields of c that livesync set (o.Set) and that are the original again
// with livesync no longer their owner: a reconciler (or a hand) put them back.
func reverted(w *workload.Workload, c workload.Container, o workload.Original) []Reverted {
	if o.Set == nil {
		return nil
	}
	var out []Reverted
	for _, f := range []struct{ name, set, orig, now string }{
		{workload.FieldImage, o.Set.Image, o.Image, c.Image},
		{workload.FieldPullPolicy, o.Set.PullPolicy, o.PullPolicy, c.PullPolicy},
	} {
		if f.set == f.orig || f.now == f.set || f.now != f.orig {
			continue
		}
		r := Reverted{Field: f.name, Set: f.set}
		for _, fo := range w.FieldOwners(c, f.name) {
			if fo.Manager != workload.FieldManager {
				r.Manager = fo.Manager
				break
			}
		}
		out = append(out, r)
	}
	return out
}
