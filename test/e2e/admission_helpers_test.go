//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// guardMessage is what the admission guard answers; only the API server can say it.
const guardMessage = "e2e admission guard: livesync may not write here"

// admissionGuard makes the API server reject every write to the deployments of ns by the
// suite's livesync user, with a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1,
// GA since Kubernetes 1.30, enforced in-process: no webhook server). A client-side dry run
// never meets it: a --dry-run that reports guardMessage sent its request to the API server.
// It returns once the API server enforces the policy; call the returned func to lift it.
func admissionGuard(t *testing.T, ns, probe string) (lift func()) {
	t.Helper()
	name := "e2e-guard-" + ns
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				}}},
			},
			// Only livesync's user: the controllers keep writing as usual.
			MatchConditions: []admissionv1.MatchCondition{{
				Name:       "livesync-user",
				Expression: "request.userInfo.username == 'system:serviceaccount:" + ns + ":livesync'",
			}},
			Validations: []admissionv1.Validation{{Expression: "false", Message: guardMessage}},
		},
	}
	remove := createPolicy(t, policy)
	lifted := false
	lift = func() {
		if lifted {
			return
		}
		lifted = true
		remove()
		waitGuard(t, ns, probe, false)
	}
	waitGuard(t, ns, probe, true)
	return lift
}

// waitGuard waits until a server-side dry-run patch of deployment probe, as the livesync
// user, is rejected by the guard (enforced) or accepted (not): policies take effect
// asynchronously.
func waitGuard(t *testing.T, ns, probe string, enforced bool) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigFor([]string{"-n", ns}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	what := "the admission guard to be lifted"
	if enforced {
		what = "the API server to enforce the admission guard (is the ValidatingAdmissionPolicy admission plugin on?)"
	}
	patch := []byte(`{"metadata":{"annotations":{"e2e-guard-probe":"` + time.Now().Format(time.RFC3339Nano) + `"}}}`)
	waitFor(t, what, time.Minute, func() (bool, error) {
		_, err := c.AppsV1().Deployments(ns).Patch(context.Background(), probe, types.MergePatchType, patch,
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		rejected := err != nil && strings.Contains(err.Error(), guardMessage)
		if err != nil && !rejected && !apierrors.IsInvalid(err) {
			return false, err
		}
		return rejected == enforced, nil
	})
}

// createPolicy creates policy with a Deny binding of the same name, removed when the test ends;
// call the returned func to remove them earlier.
func createPolicy(t *testing.T, policy *admissionv1.ValidatingAdmissionPolicy) (remove func()) {
	t.Helper()
	ctx := context.Background()
	name := policy.Name
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	api := e.client.AdmissionregistrationV1()
	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ValidatingAdmissionPolicy %s: %v", name, err)
	}
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the binding of ValidatingAdmissionPolicy %s: %v", name, err)
	}
	remove = func() {
		_ = api.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_ = api.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{})
	}
	t.Cleanup(remove)
	return remove
}
