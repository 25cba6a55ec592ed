package workload

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/resource"
)

// KindSelected is the Kind of the target that -l SELECTOR without a TYPE makes: the pods the
// selector picks, now and later, not one object with a pod template. Its Ref is
// "pods/SELECTOR"; it has no template to patch.
const KindSelected = "Pods"

// ForSelector returns the target of -l SELECTOR without a TYPE: every pod sel selects in
// namespace, including pods that do not exist yet (the Tracker waits for one and says why).
// Its Spec is empty: selected pods may differ, so the Tracker checks each pod's containers.
func ForSelector(namespace string, sel labels.Selector) *Workload {
	return &Workload{Kind: KindSelected, Namespace: namespace, Name: sel.String(), Selector: sel, Spec: &corev1.PodSpec{}}
}

// ResolveTarget reads the one workload a sync session follows. -l without a TYPE selects
// pods: one match is that Pod; none or several make a ForSelector target, which takes the
// first match's spec to pick the default container. A TYPE with -l that matches several
// workloads is an error: a session syncs one.
func ResolveTarget(b *resource.Builder, namespace string, args []string, selector string) (*Workload, error) {
	ws, err := Resolve(b, namespace, args, selector)
	pods := len(args) == 0 && selector != ""
	noMatch := pods && errors.Is(err, ErrNoMatch)
	switch {
	case err != nil && !noMatch:
		return nil, err
	case len(ws) == 1:
		return ws[0], nil
	case pods:
		sel, err := labels.Parse(selector)
		if err != nil {
			return nil, fmt.Errorf("parsing -l %q: %w", selector, err)
		}
		w := ForSelector(namespace, sel)
		if len(ws) > 0 {
			w.Spec, w.PodAnnotations = ws[0].Spec, ws[0].PodAnnotations
		}
		return w, nil
	}
	var names []string
	for _, w := range ws {
		names = append(names, w.Ref())
	}
	return nil, fmt.Errorf("-l %q matches %d workloads (%s): sync one at a time", selector, len(ws), strings.Join(names, ", "))
}
