// Package inspect builds the per-container image report of a workload: what the spec says,
// what each pod runs, what the registry serves now, and the verdict. Its JSON form is a
// stable contract documented in docs/images.md. PlanRefresh turns the report into refresh's
// decision: which containers moved, what digest to pin, or that only the rollout is behind.
package inspect

import (
	"context"
	"sync"

	"k8s.io/client-go/kubernetes"

	"github.com/livesync-dev/kubectl-livesync/pkg/image"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// Resolver resolves a tag to the digest its registry serves now.
type Resolver interface {
	Resolve(ctx context.Context, ref image.Reference) (string, error)
}

// Report is the inspect result for one workload.
type Report struct {
	Workload   Ref         `json:"workload"`
	Containers []Container `json:"containers"`
}

// Ref names a workload.
type Ref struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Container is the report of one container of the pod template.
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
	Notes               []string           `json:"notes"`

	// Ref is the parsed image; RegistryErr the resolve error, for callers that decide on it.
	Ref         image.Reference `json:"-"`
	RegistryErr error           `json:"-"`
}

// Pod is what one pod's container runs.
type Pod struct {
	Name     string `json:"name"`
	Node     string `json:"node"`
	Digest   string `json:"digest"`
	Ready    bool   `json:"ready"`
	Restarts int32  `json:"restarts"`
}

// Build reads the workload's pods and asks the registry once per distinct image, in parallel.
func Build(ctx context.Context, client kubernetes.Interface, res Resolver, w *workload.Workload, containers []workload.Container) (*Report, error) {
	pods, err := w.Pods(ctx, client)
	if err != nil {
		return nil, err
	}
	orig, err := w.Originals()
	if err != nil {
		return nil, err
	}
	rep := &Report{Workload: Ref{Kind: w.Kind, Namespace: w.Namespace, Name: w.Name}}
	type result struct {
		digest string
		err    error
	}
	results := map[string]*result{}
	var wg sync.WaitGroup
	for _, c := range containers {
		cr := Container{Name: c.Name, Init: c.Init, Image: c.Image, PullPolicy: c.PullPolicy, Pods: []Pod{}, Notes: []string{}}
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
		if o, ok := orig[c.Name]; ok {
			o := o
			cr.Original = &o
		}
		for i := range pods {
			p := &pods[i]
			if p.DeletionTimestamp != nil {
				continue
			}
			st := workload.ContainerStatus(p, c.Name, c.Init)
			pr := Pod{Name: p.Name, Node: p.Spec.NodeName}
			if st != nil {
				pr.Digest = image.ImageIDDigest(st.ImageID)
				pr.Ready = st.Ready
				pr.Restarts = st.RestartCount
			}
			cr.Pods = append(cr.Pods, pr)
		}
		rep.Containers = append(rep.Containers, cr)
	}
	wg.Wait()
	for i := range rep.Containers {
		c := &rep.Containers[i]
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
		in := image.VerdictInput{SpecDigest: c.PinnedDigest, RegistryDigest: c.RegistryDigest, RegistryErr: c.RegistryErr, PodDigests: c.podDigests()}
		c.Verdict = image.Evaluate(in)
		c.Notes = append(c.Notes, image.Notes(c.Ref, c.PullPolicy, in)...)
	}
	return rep, nil
}

func (c *Container) podDigests() []string {
	var out []string
	for _, p := range c.Pods {
		out = append(out, p.Digest)
	}
	return out
}

// Stale reports whether the container should be pinned to its registry digest: the spec
// pins another digest, or some pod runs another one.
func (c *Container) Stale() bool {
	if c.RegistryDigest == "" {
		return false
	}
	if c.PinnedDigest != "" && c.PinnedDigest != c.RegistryDigest {
		return true
	}
	for _, p := range c.Pods {
		if p.Digest != "" && p.Digest != c.RegistryDigest {
			return true
		}
	}
	return false
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
