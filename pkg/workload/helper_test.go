package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

const helperImage = "busybox:1.37"

var (
	targetStart = metav1.NewTime(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	running     = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(targetStart.Add(time.Minute))}}
)

// targetPod is pod "p" in namespace "ns" whose container "app" runs as c://1 since targetStart.
func targetPod(sc *corev1.SecurityContext, psc *corev1.PodSecurityContext) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{
			Containers:      []corev1.Container{{Name: "app", Image: "app:1", SecurityContext: sc}},
			SecurityContext: psc,
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", ContainerID: "c://1", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: targetStart}},
		}}},
	}
}

// withHelper adds an ephemeral container of ours named name with sc, in state st.
func withHelper(p *corev1.Pod, name, image, target string, sc *corev1.SecurityContext, st corev1.ContainerState) *corev1.Pod {
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: name, Image: image, Command: helperSleep, SecurityContext: sc},
		TargetContainerName:      target,
	})
	p.Status.EphemeralContainerStatuses = append(p.Status.EphemeralContainerStatuses, corev1.ContainerStatus{Name: name, State: st})
	return p
}

// patchCall is one PATCH the API server received on pods/ephemeralcontainers.
type patchCall struct {
	patchType types.PatchType
	dryRun    []string
	container corev1.EphemeralContainer
}

// apiServer fakes the API server's side of adding helpers: it records each patch, rejects
// those admit refuses, applies the others unless dry-run, and then lets kubelet set the new
// container's state (nil: no status, as before the kubelet acts).
type apiServer struct {
	client  *fake.Clientset
	admit   func(corev1.EphemeralContainer) error
	kubelet func(name string) *corev1.ContainerState

	mu      sync.Mutex
	calls   []patchCall
	patched chan string
}

func newAPIServer(t *testing.T, p *corev1.Pod) *apiServer {
	t.Helper()
	s := &apiServer{client: fake.NewClientset(p), patched: make(chan string, 8)}
	s.client.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pa := a.(k8stesting.PatchActionImpl)
		if pa.GetSubresource() != "ephemeralcontainers" {
			return true, nil, fmt.Errorf("patch of subresource %q", pa.GetSubresource())
		}
		var body struct {
			Spec struct {
				EphemeralContainers []corev1.EphemeralContainer `json:"ephemeralContainers"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(pa.GetPatch(), &body); err != nil {
			return true, nil, fmt.Errorf("patch body %s: %w", pa.GetPatch(), err)
		}
		if len(body.Spec.EphemeralContainers) != 1 {
			return true, nil, fmt.Errorf("patch body %s: want one ephemeral container", pa.GetPatch())
		}
		ec := body.Spec.EphemeralContainers[0]
		s.mu.Lock()
		s.calls = append(s.calls, patchCall{pa.GetPatchType(), pa.PatchOptions.DryRun, ec})
		s.mu.Unlock()
		if s.admit != nil {
			if err := s.admit(ec); err != nil {
				return true, nil, err
			}
		}
		obj, err := s.client.Tracker().Get(pa.GetResource(), pa.GetNamespace(), pa.GetName())
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod).DeepCopy()
		if len(pa.PatchOptions.DryRun) > 0 {
			return true, pod, nil
		}
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, ec)
		if s.kubelet != nil {
			if st := s.kubelet(ec.Name); st != nil {
				pod.Status.EphemeralContainerStatuses = append(pod.Status.EphemeralContainerStatuses, corev1.ContainerStatus{Name: ec.Name, State: *st})
			}
		}
		if err := s.client.Tracker().Update(pa.GetResource(), pod, pa.GetNamespace()); err != nil {
			return true, nil, err
		}
		s.patched <- ec.Name
		return true, pod, nil
	})
	return s
}

func (s *apiServer) patches() []patchCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]patchCall(nil), s.calls...)
}

// setHelperState is the kubelet reporting the state of ephemeral container name, the only one.
func (s *apiServer) setHelperState(t *testing.T, name string, st corev1.ContainerState) {
	t.Helper()
	pods := s.client.CoreV1().Pods("ns")
	p, err := pods.Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.EphemeralContainerStatuses = []corev1.ContainerStatus{{Name: name, State: st}}
	if _, err := pods.UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (s *apiServer) pod(t *testing.T) *corev1.Pod {
	t.Helper()
	p, err := s.client.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// podSecurity admits what PodSecurity at level does, with its wording, for the checks a
// helper can trip.
func podSecurity(level string) func(corev1.EphemeralContainer) error {
	return func(ec corev1.EphemeralContainer) error {
		sc := ec.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		var v []string
		if level != "privileged" && hasPtrace(sc) {
			v = append(v, fmt.Sprintf(`non-default capabilities (container %q must not include "SYS_PTRACE" in securityContext.capabilities.add)`, ec.Name))
		}
		if level == "restricted" {
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				v = append(v, fmt.Sprintf(`allowPrivilegeEscalation != false (container %q must set securityContext.allowPrivilegeEscalation=false)`, ec.Name))
			}
			if sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				v = append(v, fmt.Sprintf(`unrestricted capabilities (container %q must set securityContext.capabilities.drop=["ALL"])`, ec.Name))
			}
			if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
				v = append(v, fmt.Sprintf(`runAsNonRoot != true (container %q must set securityContext.runAsNonRoot=true)`, ec.Name))
			}
			if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
				v = append(v, fmt.Sprintf(`runAsUser=0 (container %q must not set runAsUser=0)`, ec.Name))
			}
			if sc.SeccompProfile == nil {
				v = append(v, fmt.Sprintf(`seccompProfile (container %q must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`, ec.Name))
			}
		}
		if len(v) == 0 {
			return nil
		}
		return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p",
			fmt.Errorf(`violates PodSecurity "%s:latest": %s`, level, strings.Join(v, ", ")))
	}
}

func startRunning(string) *corev1.ContainerState { return &running }

func rootPtrace() *corev1.SecurityContext { return rootPtraceContext() }

func sameUser(uid, gid int64) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsUser: ptr.To(uid), RunAsGroup: ptr.To(gid), RunAsNonRoot: ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// TestHelperAdds: the patch adds one sleeping ephemeral container aimed at the target, with
// the profile the namespace's PodSecurity level admits.
func TestHelperAdds(t *testing.T) {
	tests := []struct {
		name    string
		pod     *corev1.Pod
		level   string
		wantSC  *corev1.SecurityContext
		want    Helper
		patches int
	}{
		{"privileged: root with SYS_PTRACE", targetPod(&corev1.SecurityContext{RunAsUser: ptr.To(int64(65532))}, nil), "privileged",
			rootPtrace(), Helper{Profile: HelperRootPtrace, Level: "privileged"}, 1},
		{"baseline: the container's uid and gid", targetPod(&corev1.SecurityContext{RunAsUser: ptr.To(int64(65532)), RunAsGroup: ptr.To(int64(1000))}, nil), "baseline",
			sameUser(65532, 1000), Helper{Profile: HelperSameUser, Level: "baseline", UID: ptr.To(int64(65532)), GID: ptr.To(int64(1000))}, 2},
		{"restricted: the pod's uid, gid defaults to it", targetPod(nil, &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(1001))}), "restricted",
			sameUser(1001, 1001), Helper{Profile: HelperSameUser, Level: "restricted", UID: ptr.To(int64(1001)), GID: ptr.To(int64(1001))}, 2},
		{"the container's uid over the pod's, the pod's gid", targetPod(&corev1.SecurityContext{RunAsUser: ptr.To(int64(7))}, &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(8)), RunAsGroup: ptr.To(int64(9))}), "restricted",
			sameUser(7, 9), Helper{Profile: HelperSameUser, Level: "restricted", UID: ptr.To(int64(7)), GID: ptr.To(int64(9))}, 2},
		{"baseline without a uid: root, no SYS_PTRACE", targetPod(nil, nil), "baseline",
			&corev1.SecurityContext{RunAsUser: ptr.To(int64(0))}, Helper{Profile: HelperSameUser, Level: "baseline", UID: ptr.To(int64(0))}, 2},
		{"baseline, target explicitly root: no runAsNonRoot", targetPod(&corev1.SecurityContext{RunAsUser: ptr.To(int64(0))}, nil), "baseline",
			&corev1.SecurityContext{RunAsUser: ptr.To(int64(0)), RunAsGroup: ptr.To(int64(0)), AllowPrivilegeEscalation: ptr.To(false),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Helper{Profile: HelperSameUser, Level: "baseline", UID: ptr.To(int64(0)), GID: ptr.To(int64(0))}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newAPIServer(t, tc.pod)
			s.admit, s.kubelet = podSecurity(tc.level), startRunning
			h := &Helpers{Client: s.client, Image: helperImage}
			got, err := h.Ensure(context.Background(), "ns", "p", "app", "c://1")
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			want.Namespace, want.Pod, want.Container, want.Name = "ns", "p", "app", "livesync-helper-1"
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("helper %+v, want %+v", *got, want)
			}
			calls := s.patches()
			if len(calls) != tc.patches {
				t.Fatalf("%d patches, want %d", len(calls), tc.patches)
			}
			last := calls[len(calls)-1]
			wantEC := corev1.EphemeralContainer{
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{
					Name: "livesync-helper-1", Image: helperImage, ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"sleep", "2147483647"}, SecurityContext: tc.wantSC,
				},
				TargetContainerName: "app",
			}
			if last.patchType != types.StrategicMergePatchType || last.dryRun != nil {
				t.Errorf("patch type %s, dry run %v", last.patchType, last.dryRun)
			}
			if !reflect.DeepEqual(last.container, wantEC) {
				t.Errorf("patched\n%+v\nwant\n%+v", last.container, wantEC)
			}
			if n := len(s.pod(t).Spec.EphemeralContainers); n != 1 {
				t.Errorf("pod has %d ephemeral containers, want 1", n)
			}
		})
	}
}

// TestHelperRefused: what the API server refuses comes back as one line naming the fix, and
// nothing else is tried or changed.
func TestHelperRefused(t *testing.T) {
	rbac := func(corev1.EphemeralContainer) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "pods/ephemeralcontainers"}, "p",
			errors.New(`User "dev" cannot patch resource "pods/ephemeralcontainers" in API group "" in the namespace "ns"`))
	}
	webhook := func(corev1.EphemeralContainer) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p",
			errors.New(`admission webhook "validate.kyverno.svc" denied the request: no debug containers`))
	}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		admit   func(corev1.EphemeralContainer) error
		patches int
		want    string
	}{
		{"restricted without a uid", targetPod(nil, nil), podSecurity("restricted"), 1,
			`pod "p" in namespace "ns": PodSecurity "restricted" only admits a helper that runs as container "app"'s user, and "app" sets no runAsUser: set securityContext.runAsUser and runAsGroup on it, or use a namespace at level privileged`},
		{"restricted, target runs as root", targetPod(&corev1.SecurityContext{RunAsUser: ptr.To(int64(0))}, nil), podSecurity("restricted"), 2,
			`adding a helper container to pod "p" in namespace "ns": PodSecurity "restricted" rejects even a helper running as uid 0 gid 0 with all capabilities dropped: runAsNonRoot != true (container "livesync-helper-1" must set securityContext.runAsNonRoot=true), runAsUser=0 (container "livesync-helper-1" must not set runAsUser=0): label the namespace pod-security.kubernetes.io/enforce=privileged, or run with --helper never`},
		{"RBAC", targetPod(nil, nil), rbac, 1,
			`adding a helper container to pod "p" in namespace "ns": not allowed: grant the RBAC verb "patch" on "pods/ephemeralcontainers", or run with --helper never`},
		{"admission webhook", targetPod(nil, nil), webhook, 1,
			`adding a helper container to pod "p" in namespace "ns": refused by an admission webhook: pods "p" is forbidden: admission webhook "validate.kyverno.svc" denied the request: no debug containers: ask for an exception, or run with --helper never`},
		{"invalid", targetPod(nil, nil), func(corev1.EphemeralContainer) error {
			return apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", nil)
		}, 1, `adding a helper container to pod "p" in namespace "ns": Pod "p" is invalid`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newAPIServer(t, tc.pod)
			s.admit, s.kubelet = tc.admit, startRunning
			h := &Helpers{Client: s.client, Image: helperImage}
			got, err := h.Ensure(context.Background(), "ns", "p", "app", "c://1")
			if err == nil {
				t.Fatalf("added %+v", got)
			}
			if err.Error() != tc.want {
				t.Errorf("error\n%s\nwant\n%s", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
			if n := len(s.patches()); n != tc.patches {
				t.Errorf("%d patches, want %d", n, tc.patches)
			}
			if n := len(s.pod(t).Spec.EphemeralContainers); n != 0 {
				t.Errorf("pod has %d ephemeral containers", n)
			}
		})
	}
}

// TestHelperReuse: a live helper of ours with the same image, target and profile is reused
// without a patch; one from before the target restarted, or of another image, target or user,
// is not, and the new one takes the next free name.
func TestHelperReuse(t *testing.T) {
	before := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(targetStart.Add(-time.Second))}}
	terminated := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}
	uid := &corev1.SecurityContext{RunAsUser: ptr.To(int64(1000))}
	tests := []struct {
		name   string
		pod    *corev1.Pod
		reused *Helper // nil: a new helper is added
		added  string
	}{
		{"root+SYS_PTRACE", withHelper(targetPod(uid, nil), "livesync-helper-1", helperImage, "app", rootPtrace(), running),
			&Helper{Name: "livesync-helper-1", Profile: HelperRootPtrace, Level: "privileged"}, ""},
		{"same user", withHelper(targetPod(uid, nil), "livesync-helper-1", helperImage, "app", sameUser(1000, 1000), running),
			&Helper{Name: "livesync-helper-1", Profile: HelperSameUser, UID: ptr.To(int64(1000)), GID: ptr.To(int64(1000))}, ""},
		{"started as the target did", withHelper(targetPod(uid, nil), "livesync-helper-1", helperImage, "app", rootPtrace(),
			corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: targetStart}}),
			&Helper{Name: "livesync-helper-1", Profile: HelperRootPtrace, Level: "privileged"}, ""},
		{"the newest of two", withHelper(withHelper(targetPod(uid, nil), "livesync-helper-1", helperImage, "app", rootPtrace(), before),
			"livesync-helper-2", helperImage, "app", rootPtrace(), running),
			&Helper{Name: "livesync-helper-2", Profile: HelperRootPtrace, Level: "privileged"}, ""},
		{"stale: started before the target restarted", withHelper(targetPod(uid, nil), "livesync-helper-1", helperImage, "app", rootPtrace(), before), nil, "livesync-helper-2"},
		{"terminated", withHelper(targetPod(uid, nil), "livesync-helper-1", helperImage, "app", rootPtrace(), terminated), nil, "livesync-helper-2"},
		{"no status yet", withHelper(targetPod(uid, nil), "livesync-helper-1", helperImage, "app", rootPtrace(), corev1.ContainerState{}), nil, "livesync-helper-2"},
		{"another image", withHelper(targetPod(uid, nil), "livesync-helper-1", "busybox:1.36", "app", rootPtrace(), running), nil, "livesync-helper-2"},
		{"another target", withHelper(targetPod(uid, nil), "livesync-helper-1", helperImage, "sidecar", rootPtrace(), running), nil, "livesync-helper-2"},
		{"another user", withHelper(targetPod(uid, nil), "livesync-helper-1", helperImage, "app", sameUser(1001, 1001), running), nil, "livesync-helper-2"},
		{"another group", withHelper(targetPod(uid, nil), "livesync-helper-1", helperImage, "app", sameUser(1000, 0), running), nil, "livesync-helper-2"},
		{"not ours", withHelper(targetPod(uid, nil), "debugger-x", helperImage, "app", rootPtrace(), running), nil, "livesync-helper-1"},
		{"names taken by containers", func() *corev1.Pod {
			p := withHelper(targetPod(uid, nil), "livesync-helper-2", "other", "app", nil, running)
			p.Spec.InitContainers = []corev1.Container{{Name: "livesync-helper-1"}}
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "livesync-helper-3"})
			return p
		}(), nil, "livesync-helper-4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newAPIServer(t, tc.pod)
			s.kubelet = startRunning
			h := &Helpers{Client: s.client, Image: helperImage}
			got, err := h.Ensure(context.Background(), "ns", "p", "app", "c://1")
			if err != nil {
				t.Fatal(err)
			}
			calls := s.patches()
			if tc.reused != nil {
				want := *tc.reused
				want.Namespace, want.Pod, want.Container, want.Reused = "ns", "p", "app", true
				if !reflect.DeepEqual(*got, want) {
					t.Errorf("helper %+v, want %+v", *got, want)
				}
				if len(calls) != 0 {
					t.Errorf("%d patches, want none", len(calls))
				}
				return
			}
			if got.Reused || got.Name != tc.added || len(calls) != 1 || calls[0].container.Name != tc.added {
				t.Errorf("helper %+v after %d patches, want %s added", *got, len(calls), tc.added)
			}
		})
	}
}

// TestHelperWaits: Ensure returns once the kubelet reports the new helper running, fails at
// once on a reason that does not clear, and gives up after Timeout on the injected clock.
func TestHelperWaits(t *testing.T) {
	waiting := func(reason, msg string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	}
	tests := []struct {
		name    string
		initial *corev1.ContainerState  // what the patched pod reports
		states  []corev1.ContainerState // what the kubelet reports after the patch, in order
		timeout bool                    // then the clock passes Timeout
		want    string                  // the error; empty: running
	}{
		{"running", nil, []corev1.ContainerState{waiting("ContainerCreating", ""), running}, false, ""},
		{"image pull failure", nil, []corev1.ContainerState{waiting("ErrImagePull", "rpc error: code = NotFound desc = failed to pull \"busybox:1.37\": not found\ndetails")}, false,
			`helper container "livesync-helper-1" in pod "p" of namespace "ns" cannot start image "busybox:1.37": ErrImagePull: rpc error: code = NotFound desc = failed to pull "busybox:1.37": not found: use a helper image the cluster can pull and run, or run with --helper never`},
		{"create error", nil, []corev1.ContainerState{waiting("CreateContainerError", "no command")}, false,
			`helper container "livesync-helper-1" in pod "p" of namespace "ns" cannot start image "busybox:1.37": CreateContainerError: no command: use a helper image the cluster can pull and run, or run with --helper never`},
		{"exited", nil, []corev1.ContainerState{{Terminated: &corev1.ContainerStateTerminated{ExitCode: 127, Reason: "StartError", Message: `exec: "sleep": executable file not found in $PATH`}}}, false,
			`helper container "livesync-helper-1" in pod "p" of namespace "ns" exited with code 127 (StartError: exec: "sleep": executable file not found in $PATH): image "busybox:1.37" must run ` + "`sleep`" + `; use one with sleep, sh and tar such as busybox, or run with --helper never`},
		{"timeout", ptr.To(waiting("ContainerCreating", "")), nil, true,
			`helper container "livesync-helper-1" in pod "p" of namespace "ns" is not running after 2m0s (ContainerCreating): see kubectl describe pod p -n ns`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newAPIServer(t, targetPod(nil, nil))
			clk := clocktesting.NewFakeClock(time.Now())
			s.kubelet = func(string) *corev1.ContainerState { return tc.initial }
			h := &Helpers{Client: s.client, Image: helperImage, clock: clk}
			type result struct {
				h   *Helper
				err error
			}
			done := make(chan result, 1)
			go func() {
				hp, err := h.Ensure(context.Background(), "ns", "p", "app", "c://1")
				done <- result{hp, err}
			}()
			name := <-s.patched
			for _, st := range tc.states {
				s.setHelperState(t, name, st)
			}
			if tc.timeout {
				clk.Step(2*time.Minute - time.Nanosecond)
				select {
				case r := <-done:
					t.Fatalf("returned before the timeout: %+v, %v", r.h, r.err)
				default:
				}
				clk.Step(time.Nanosecond)
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Ensure did not return")
			}
			if tc.want == "" {
				if r.err != nil || r.h.Name != "livesync-helper-1" || r.h.Reused {
					t.Fatalf("got %+v, %v", r.h, r.err)
				}
				return
			}
			if r.err == nil || r.err.Error() != tc.want {
				t.Errorf("error\n%v\nwant\n%s", r.err, tc.want)
			}
		})
	}
}

// TestHelperDryRun: the server validates the patch (RBAC, PodSecurity) in dry-run; nothing is
// added and nothing is waited for.
func TestHelperDryRun(t *testing.T) {
	s := newAPIServer(t, targetPod(&corev1.SecurityContext{RunAsUser: ptr.To(int64(1000))}, nil))
	s.admit = podSecurity("baseline")
	h := &Helpers{Client: s.client, Image: helperImage, DryRun: true}
	got, err := h.Ensure(context.Background(), "ns", "p", "app", "c://1")
	if err != nil {
		t.Fatal(err)
	}
	if !got.DryRun || got.Profile != HelperSameUser || got.Level != "baseline" {
		t.Errorf("helper %+v", *got)
	}
	calls := s.patches()
	if len(calls) != 2 {
		t.Fatalf("%d patches, want 2", len(calls))
	}
	for _, c := range calls {
		if !reflect.DeepEqual(c.dryRun, []string{metav1.DryRunAll}) {
			t.Errorf("dryRun %v", c.dryRun)
		}
	}
	if n := len(s.pod(t).Spec.EphemeralContainers); n != 0 {
		t.Errorf("pod has %d ephemeral containers", n)
	}
}

// TestHelperTargetNotRunning: a helper is only added for the target instance asked for.
func TestHelperTargetNotRunning(t *testing.T) {
	restarted := targetPod(nil, nil)
	restarted.Status.ContainerStatuses[0].ContainerID = "c://2"
	waitingPod := targetPod(nil, nil)
	waitingPod.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"restarted", restarted, `container "app" of pod "p" in namespace "ns": target container is not running as c://1: it restarted as c://2; sync into the new instance`},
		{"waiting", waitingPod, `container "app" of pod "p" in namespace "ns": target container is not running: wait until it runs`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newAPIServer(t, tc.pod)
			h := &Helpers{Client: s.client, Image: helperImage}
			_, err := h.Ensure(context.Background(), "ns", "p", "app", "c://1")
			if !errors.Is(err, ErrTargetNotRunning) || err.Error() != tc.want {
				t.Errorf("error\n%v\nwant\n%s", err, tc.want)
			}
			if n := len(s.patches()); n != 0 {
				t.Errorf("%d patches", n)
			}
		})
	}
}

// TestTargetUser: the user comes from the container, then the pod, then what the kubelet
// reports the container started as.
func TestTargetUser(t *testing.T) {
	reported := func(p *corev1.Pod, uid, gid int64) *corev1.Pod {
		p.Status.ContainerStatuses[0].User = &corev1.ContainerUser{Linux: &corev1.LinuxContainerUser{UID: uid, GID: gid}}
		return p
	}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		uid, gid *int64
	}{
		{"unknown", targetPod(nil, nil), nil, nil},
		{"container uid only", targetPod(&corev1.SecurityContext{RunAsUser: ptr.To(int64(5))}, nil), ptr.To(int64(5)), ptr.To(int64(5))},
		{"reported by the kubelet", reported(targetPod(nil, nil), 65532, 65533), ptr.To(int64(65532)), ptr.To(int64(65533))},
		{"reported gid for the spec's uid", reported(targetPod(&corev1.SecurityContext{RunAsUser: ptr.To(int64(5))}, nil), 5, 6), ptr.To(int64(5)), ptr.To(int64(6))},
		{"spec over a report of another uid", reported(targetPod(&corev1.SecurityContext{RunAsUser: ptr.To(int64(5))}, nil), 7, 8), ptr.To(int64(5)), ptr.To(int64(5))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			uid, gid := targetUser(tc.pod, "app")
			if !reflect.DeepEqual(uid, tc.uid) || !reflect.DeepEqual(gid, tc.gid) {
				t.Errorf("uid %v gid %v, want %v %v", ptr.Deref(uid, -1), ptr.Deref(gid, -1), ptr.Deref(tc.uid, -1), ptr.Deref(tc.gid, -1))
			}
		})
	}
}

// TestHelperEnsureGroup: a gid the caller learned replaces the guess (gid = uid): a helper of
// the guessed gid is not reused, the new one runs as the learned gid and is reused after.
func TestHelperEnsureGroup(t *testing.T) {
	guessed := withHelper(targetPod(&corev1.SecurityContext{RunAsUser: ptr.To(int64(65532))}, nil),
		"livesync-helper-1", helperImage, "app", sameUser(65532, 65532), running)
	s := newAPIServer(t, guessed)
	s.admit, s.kubelet = podSecurity("baseline"), startRunning
	h := &Helpers{Client: s.client, Image: helperImage}
	got, err := h.EnsureGroup(context.Background(), "ns", "p", "app", "c://1", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := Helper{Namespace: "ns", Pod: "p", Container: "app", Name: "livesync-helper-2", Profile: HelperSameUser, Level: "baseline", UID: ptr.To(int64(65532)), GID: ptr.To(int64(0))}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("helper %+v, want %+v", *got, want)
	}
	calls := s.patches()
	if len(calls) != 2 || !reflect.DeepEqual(calls[1].container.SecurityContext, sameUser(65532, 0)) {
		t.Fatalf("patches %+v", calls)
	}
	again, err := h.EnsureGroup(context.Background(), "ns", "p", "app", "c://1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Reused || again.Name != "livesync-helper-2" || len(s.patches()) != 2 {
		t.Errorf("second call %+v after %d patches, want livesync-helper-2 reused", *again, len(s.patches()))
	}

	// Without a known uid, baseline's root helper takes the learned gid.
	s = newAPIServer(t, targetPod(nil, nil))
	s.admit, s.kubelet = podSecurity("baseline"), startRunning
	h = &Helpers{Client: s.client, Image: helperImage}
	if _, err := h.EnsureGroup(context.Background(), "ns", "p", "app", "c://1", 3); err != nil {
		t.Fatal(err)
	}
	calls = s.patches()
	if wantSC := (&corev1.SecurityContext{RunAsUser: ptr.To(int64(0)), RunAsGroup: ptr.To(int64(3))}); len(calls) != 2 || !reflect.DeepEqual(calls[1].container.SecurityContext, wantSC) {
		t.Errorf("patches %+v", calls)
	}
}
