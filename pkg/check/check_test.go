package check

import (
	"context"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// allowing answers SelfSubjectAccessReviews: allowed unless the access is in denied.
func allowing(denied ...string) *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		ra := r.Spec.ResourceAttributes
		acc := Access{Verb: ra.Verb, Group: ra.Group, Resource: ra.Resource, Subresource: ra.Subresource}.String()
		r.Status.Allowed = true
		for _, d := range denied {
			if d == acc {
				r.Status.Allowed = false
			}
		}
		return true, r, nil
	})
	return c
}

func TestRBAC(t *testing.T) {
	needs := Needs("apps", "deployments")
	for _, tc := range []struct {
		name   string
		denied []string
		want   Status
		detail string
	}{
		{"all allowed", nil, OK, `every verb livesync uses is allowed in namespace "dev"`},
		{"no exec", []string{"create pods/exec"}, Fail, "missing in namespace dev: create pods/exec (sync)"},
		{"no helper, no patch", []string{"patch pods/ephemeralcontainers", "patch deployments.apps"}, Warn,
			"missing in namespace dev: patch pods/ephemeralcontainers (helper containers), patch deployments.apps (refresh, pull-policy, restore, --restart process)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := RBAC(context.Background(), allowing(tc.denied...), "dev", needs)
			if v.Status != tc.want || v.Detail != tc.detail {
				t.Errorf("RBAC = %s %q, want %s %q", v.Status, v.Detail, tc.want, tc.detail)
			}
		})
	}
}

func TestTools(t *testing.T) {
	where := `container "app" of pod "web-1"`
	for _, tc := range []struct {
		name   string
		c      remote.Check
		helper string
		want   Status
		has    string
	}{
		{"all there", remote.Check{Tar: true, Stream: true, Root: remote.RootDir, Writable: true}, "auto", OK, "/app is a directory"},
		{"no dd", remote.Check{Tar: true, Root: remote.RootMissing, Writable: true}, "auto", OK, "an exec per batch"},
		{"no tar, helper", remote.Check{Root: remote.RootDir, Writable: true}, "auto", Warn, "through a helper container"},
		{"no tar, never", remote.Check{Root: remote.RootDir, Writable: true}, "never", Fail, "drop --helper never"},
		{"not writable", remote.Check{Tar: true, UID: "1000", Root: remote.RootDir}, "auto", Fail, "may not write /app (uid 1000)"},
		{"not a directory", remote.Check{Tar: true, Root: remote.RootNotDir, Writable: true}, "auto", Fail, "/app is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tools(&tc.c, where, "/app", tc.helper)
			if got := v.Detail + ": " + v.Fix; v.Status != tc.want || !strings.Contains(got, tc.has) {
				t.Errorf("tools = %s %q, want %s with %q", v.Status, got, tc.want, tc.has)
			}
		})
	}
}

func TestPodSecurity(t *testing.T) {
	labelled := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dev", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}}})
	if v := PodSecurity(context.Background(), labelled, "dev", ""); !strings.Contains(v.Detail, "enforces PodSecurity baseline") {
		t.Errorf("labelled: %q", v.Detail)
	}
	// A user bound to docs/rbac.yaml may not read namespaces: the helper's dry run tells.
	unreadable := fake.NewClientset()
	if v := PodSecurity(context.Background(), unreadable, "dev", "restricted"); v.Status != OK || !strings.Contains(v.Detail, "enforces PodSecurity restricted (as the API server answered") {
		t.Errorf("unreadable, level known: %s %q", v.Status, v.Detail)
	}
	if v := PodSecurity(context.Background(), unreadable, "dev", ""); v.Status != Warn {
		t.Errorf("unreadable, level unknown: %s %q, want warn", v.Status, v.Detail)
	}
}
