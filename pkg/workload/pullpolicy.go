package workload

import "fmt"

// PullPolicyPlan is what setting an imagePullPolicy does to one workload. Commands print it
// and apply Patch.
type PullPolicyPlan struct {
	Workload *Workload
	Policy   string
	// Containers are the chosen containers and image volumes as the template has them now, in
	// template order.
	Containers []Container
	// Changes are those of Containers whose policy is not Policy yet.
	Changes []Change
}

// PlanPullPolicy decides which of the named containers and image volumes (Images: all when
// neither is named) get policy.
// It refuses, before anything changes: a Pod whose policy would change (the API server keeps
// a Pod's imagePullPolicy as it was created), a kind whose pods a template change does not
// replace, and a record livesync cannot read (see Originals).
func PlanPullPolicy(w *Workload, containers, volumes []string, policy string) (*PullPolicyPlan, error) {
	cs, err := w.Images(containers, volumes)
	if err != nil {
		return nil, err
	}
	if err := w.CanRollOut(); err != nil {
		return nil, err
	}
	if _, err := w.Originals(); err != nil {
		return nil, err
	}
	p := &PullPolicyPlan{Workload: w, Policy: policy, Containers: cs}
	for _, c := range cs {
		if c.PullPolicy != policy {
			p.Changes = append(p.Changes, Change{Container: c, PullPolicy: policy})
		}
	}
	if len(p.Changes) > 0 && w.Kind == KindPod {
		return nil, fmt.Errorf("%s: a Pod's imagePullPolicy cannot be changed while it exists: change the workload that owns it (e.g. its Deployment)", w.Ref())
	}
	return p, nil
}

// Patch returns the patch that applies the plan and records the originals, or nil when every
// container already has the policy.
func (p *PullPolicyPlan) Patch() (*Patch, error) {
	if len(p.Changes) == 0 {
		return nil, nil
	}
	return BuildPatch(p.Workload, p.Changes, false)
}
