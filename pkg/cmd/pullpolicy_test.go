package cmd

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPullPolicy(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		wantOut  []string
		policies []corev1.PullPolicy // of app and sidecar after; nil: no patch
	}{
		{
			name: "change",
			args: []string{"pull-policy", "deployment/web", "Always", "-c", "app", "--no-wait"},
			wantOut: []string{
				`deployment/web: container "app": imagePullPolicy IfNotPresent -> Always`,
				"deployment/web patched; not waiting for the rollout (--no-wait)",
			},
			policies: []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent},
		},
		{
			name: "no-op",
			args: []string{"pull-policy", "deployment/web", "IfNotPresent"},
			wantOut: []string{
				`deployment/web: container "app" already has imagePullPolicy IfNotPresent`,
				`deployment/web: container "sidecar" already has imagePullPolicy IfNotPresent`,
				"deployment/web: nothing changed",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, after, patches, err := runImageCommand(t, imageDeployment("", devImage, sideImage), tc.args...)
			if err != nil {
				t.Fatalf("pull-policy: %v\n%s", err, out)
			}
			for _, want := range tc.wantOut {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if tc.policies == nil {
				if len(patches) != 0 {
					t.Errorf("a no-op sent %d patches", len(patches))
				}
				return
			}
			for i, c := range after.Spec.Template.Spec.Containers {
				if c.ImagePullPolicy != tc.policies[i] {
					t.Errorf("container %s: imagePullPolicy %s, want %s", c.Name, c.ImagePullPolicy, tc.policies[i])
				}
			}
		})
	}
}

// TestPullPolicyPodRefused: a Pod's pull policy is immutable: one error line, nothing patched.
func TestPullPolicyPodRefused(t *testing.T) {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "bare"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: devImage, ImagePullPolicy: corev1.PullIfNotPresent}}},
	}
	c := newImageCluster(p)
	err := c.execute(t, "pull-policy", "pod/bare", "Always")
	if err == nil || err.Error() != "pod/bare: a Pod's imagePullPolicy cannot be changed while it exists: change the workload that owns it (e.g. its Deployment)" {
		t.Errorf("error = %v", err)
	}
	if patches := patchesOf(c.client); len(patches) != 0 {
		t.Errorf("a refused pull-policy sent %d patches", len(patches))
	}
}
