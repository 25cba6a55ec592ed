package workload

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestPlanPullPolicy(t *testing.T) {
	w := mustWorkload(t, testDeployment())
	p, err := PlanPullPolicy(w, nil, nil, "Always")
	if err != nil {
		t.Fatal(err)
	}
	// setup and app change; sidecar already has Always.
	var changed []string
	for _, ch := range p.Changes {
		if ch.PullPolicy != "Always" || ch.Image != "" {
			t.Errorf("change %+v, want only imagePullPolicy Always", ch)
		}
		changed = append(changed, ch.Container.Name)
	}
	if strings.Join(changed, ",") != "setup,app" || len(p.Containers) != 3 {
		t.Errorf("changes %v of %d containers, want setup,app of 3", changed, len(p.Containers))
	}
	patch, err := p.Patch()
	if err != nil || patch == nil {
		t.Fatalf("Patch() = %v, %v", patch, err)
	}
	d := applyPatch(t, testDeployment(), patch.Data)
	if got := d.Spec.Template.Spec.Containers[0].ImagePullPolicy; got != corev1.PullAlways {
		t.Errorf("app policy after patch = %s", got)
	}
	if o, err := mustWorkload(t, d).Originals(); err != nil || o["app"].PullPolicy != "IfNotPresent" || o["setup"].PullPolicy != "IfNotPresent" {
		t.Errorf("originals after patch = %+v, %v", o, err)
	}

	// No-op: nothing to patch.
	p, err = PlanPullPolicy(w, []string{"sidecar"}, nil, "Always")
	if err != nil || len(p.Changes) != 0 {
		t.Fatalf("no-op plan = %+v, %v", p, err)
	}
	if patch, err := p.Patch(); patch != nil || err != nil {
		t.Errorf("no-op Patch() = %v, %v; want nil", patch, err)
	}
}

func TestPlanPullPolicyRefuses(t *testing.T) {
	pod := mustWorkloadOf(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "y:1", ImagePullPolicy: corev1.PullIfNotPresent}}},
	})
	if _, err := PlanPullPolicy(pod, nil, nil, "Always"); err == nil || err.Error() != "pod/p: a Pod's imagePullPolicy cannot be changed while it exists: change the workload that owns it (e.g. its Deployment)" {
		t.Errorf("pod: %v", err)
	}
	// What would change nothing is no change to refuse.
	if p, err := PlanPullPolicy(pod, nil, nil, "IfNotPresent"); err != nil || len(p.Changes) != 0 {
		t.Errorf("pod, same policy: %+v, %v", p, err)
	}
	rs := mustWorkloadOf(t, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{}}})
	if _, err := PlanPullPolicy(rs, nil, nil, "Always"); err == nil || !strings.Contains(err.Error(), "a ReplicaSet does not replace its pods") {
		t.Errorf("replicaset: %v", err)
	}
	bad := mustWorkload(t, annotated("null", nil))
	if _, err := PlanPullPolicy(bad, nil, nil, "Always"); !errors.Is(err, ErrBadOriginal) {
		t.Errorf("malformed record: %v", err)
	}
	if _, err := PlanPullPolicy(mustWorkload(t, testDeployment()), []string{"nope"}, nil, "Always"); err == nil || !strings.Contains(err.Error(), `container "nope" not found`) {
		t.Errorf("missing container: %v", err)
	}
}

func mustWorkloadOf(t *testing.T, obj runtime.Object) *Workload {
	t.Helper()
	w, err := FromObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	return w
}
