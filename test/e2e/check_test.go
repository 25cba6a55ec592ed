//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// execDenyMessage is what the exec-denying policy answers; only the API server says it.
const execDenyMessage = "e2e: exec is not allowed in this namespace"

type checkReport struct {
	Verdicts []struct{ Check, Status, Detail, Fix string } `json:"verdicts"`
}

func (r checkReport) verdict(t *testing.T, name string) (status, detail string) {
	t.Helper()
	for _, v := range r.Verdicts {
		if v.Check == name {
			return v.Status, v.Detail + " | " + v.Fix
		}
	}
	t.Fatalf("no %s verdict in %+v", name, r.Verdicts)
	return "", ""
}

func runCheck(t *testing.T, wantCode int, args ...string) checkReport {
	t.Helper()
	r := livesync(t, append([]string{"check", "-o", "json"}, args...)...)
	if r.code != wantCode {
		t.Fatalf("check exit code %d, want %d: %s", r.code, wantCode, r)
	}
	var rep checkReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("check -o json: %v\n%s", err, r)
	}
	return rep
}

// TestCheck runs `check` in a namespace where all is allowed, one where an admission policy
// denies pods/exec CONNECT, and one that enforces PodSecurity restricted, and then a session in
// each: what check said is what the session does.
func TestCheck(t *testing.T) {
	local := t.TempDir()
	write(t, filepath.Join(local, "a.txt"), "a")

	t.Run("allowed", func(t *testing.T) {
		ns, _ := webOf(t, "app")
		rep := runCheck(t, 0, "-n", ns, "deploy/web", local+":/app")
		for _, name := range []string{"rbac", "exec", "tools", "helper", "image"} {
			if st, d := rep.verdict(t, name); st != "ok" {
				t.Errorf("%s: %s %s, want ok", name, st, d)
			}
		}
		mustLivesync(t, "-n", ns, "deploy/web", local+":/app", "--once")
	})

	t.Run("exec denied by admission", func(t *testing.T) {
		ns, pod := webOf(t, "app")
		denyExec(t, ns, pod)
		rep := runCheck(t, 1, "-n", ns, "deploy/web", local+":/app")
		if st, d := rep.verdict(t, "exec"); st != "fail" || !strings.Contains(d, "an admission policy denies exec into pod") || !strings.Contains(d, execDenyMessage) {
			t.Errorf("exec: %s %s, want fail naming the policy's message", st, d)
		}
		if st, d := rep.verdict(t, "rbac"); st != "ok" {
			t.Errorf("rbac: %s %s, want ok: RBAC allows exec, admission denies it", st, d)
		}
		r := livesync(t, "-n", ns, "deploy/web", local+":/app", "--once")
		if r.code == 0 || !strings.Contains(r.stderr, "an admission policy denies exec into pod") || !strings.Contains(r.stderr, execDenyMessage) {
			t.Errorf("the session did not meet what check said: %s", r)
		}
	})

	t.Run("PodSecurity restricted", func(t *testing.T) {
		ns := namespace(t)
		n, err := e.client.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
		if _, err := e.client.CoreV1().Namespaces().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		repo := "app-nonroot-" + ns
		pushImage(t, repo, "dev", "app-nonroot")
		deploymentWith(t, ns, "web", image(repo, "dev"), func(spec *corev1.PodSpec) {
			spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
				RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000),
				Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		})
		hImg := helperImage(t)
		rep := runCheck(t, 0, "-n", ns, "deploy/web", local+":/home/app/src", "--helper-image", hImg)
		if st, d := rep.verdict(t, "pod-security"); st != "ok" || !strings.Contains(d, "restricted") {
			t.Errorf("pod-security: %s %s, want restricted", st, d)
		}
		if st, d := rep.verdict(t, "helper"); st != "ok" || !strings.Contains(d, "would be admitted as same-user") {
			t.Errorf("helper: %s %s, want admitted as same-user", st, d)
		}
		r := mustLivesync(t, "-n", ns, "deploy/web", local+":/home/app/src", "--helper", "ephemeral", "--helper-image", hImg, "--once", "-o", "json")
		if ev := helperEvent(t, sessiontest.ParseEvents(r.stdout)); ev.Helper.Profile != "same-user" {
			t.Errorf("the session's helper is %s, check said same-user", ev.Line)
		}
	})
}

// denyExec makes the API server deny pods/exec CONNECT in ns with a ValidatingAdmissionPolicy,
// as Kyverno's deny-exec-by-namespace-name does, and waits until an exec into pod is denied.
func denyExec(t *testing.T, ns, pod string) {
	t.Helper()
	name := "e2e-deny-exec-" + ns
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Connect},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/exec"}},
				}}},
			},
			Validations: []admissionv1.Validation{{Expression: "false", Message: execDenyMessage}},
		},
	}
	createPolicy(t, policy)
	waitFor(t, "the API server to deny exec in "+ns, time.Minute, func() (bool, error) {
		r := kexec(t, ns, pod, "true")
		return r.code != 0 && strings.Contains(r.stderr, execDenyMessage), nil
	})
}
