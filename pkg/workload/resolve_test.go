package workload

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestExplainGetError(t *testing.T) {
	forbidden := func(group, resource, name string) error {
		return apierrors.NewForbidden(schema.GroupResource{Group: group, Resource: resource}, name, errors.New("RBAC: access denied"))
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"not found names the kind and the fix", apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web"),
			`deployment "web" not found in namespace "dev": check the name, or pass -n NAMESPACE`},
		// A missing namespace comes back as the namespace object not found.
		{"a missing namespace is said once", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "dev"),
			`namespace "dev" not found: check -n, or list them with kubectl get namespaces`},
		{"a forbidden workload asks for a Role", forbidden("apps", "deployments", "web"),
			"ask for a Role with the get and list verbs on it"},
		{"a forbidden pod asks for a Role", forbidden("", "pods", "web-0"),
			"ask for a Role with the get and list verbs on it"},
		// docs/rbac.yaml grants no services: the user must learn that a service can't be
		// synced, not that a Role is missing.
		{"a forbidden kind without a pod template says so", forbidden("", "services", "svc"),
			"service has no pod template: use a deployment, statefulset, daemonset, replicaset or pod"},
		{"a forbidden job says so too", forbidden("batch", "jobs", "j"),
			"job has no pod template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := explainGetError(tt.err, "dev").Error(); !strings.Contains(got, tt.want) {
				t.Errorf("explainGetError = %q, want it to contain %q", got, tt.want)
			}
		})
	}
}
