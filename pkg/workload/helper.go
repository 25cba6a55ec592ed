package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// HelperProfile says how a helper container reaches the target container's files.
type HelperProfile string

const (
	// HelperRootPtrace runs as root with SYS_PTRACE added, which reads /proc/1/root of a
	// target running as any user; only PodSecurity "privileged" admits it.
	HelperRootPtrace HelperProfile = "root+SYS_PTRACE"
	// HelperSameUser runs as the target's uid:gid with a restricted-compliant securityContext:
	// the kernel lets a process of the same user with no more capabilities into /proc/1/root.
	HelperSameUser HelperProfile = "same-user"
)

// helperPrefix starts the name of every ephemeral container livesync adds.
const helperPrefix = "livesync-helper-"

// helperSleep keeps the helper alive without doing anything: work runs in it through exec.
var helperSleep = []string{"sleep", "2147483647"}

// ErrTargetNotRunning is wrapped by Ensure's error when the target container no longer runs
// as the instance asked for: the caller should wait for its new instance.
var ErrTargetNotRunning = errors.New("target container is not running")

// Helper is a running ephemeral container that shares the target container's PID namespace,
// so the target's files are under /proc/1/root in it.
type Helper struct {
	Namespace, Pod, Container string // Container: the target container
	Name                      string // the ephemeral container's name
	Profile                   HelperProfile
	UID, GID                  *int64 // the user the helper runs as (nil under HelperRootPtrace: root)
	// Level is the PodSecurity level that decided the profile: "privileged" unless a rejection
	// named another; empty for a reused same-user helper, whose level this run did not learn.
	Level  string
	Reused bool // an existing live helper of ours was reused
	DryRun bool // not added: the server accepted it in dry-run
}

// Helpers adds helper containers to pods, the way `kubectl debug --target` does.
type Helpers struct {
	Client  kubernetes.Interface
	Image   string        // helper image, must have sh, tar, dd, find, stat, gzip (busybox)
	DryRun  bool          // server-side dry-run of the patch: nothing added
	Timeout time.Duration // how long to wait for the helper to run; 0 = 2m

	clock clock.Clock // times the wait; nil = the real clock
}

// Ensure returns a running helper for container `container` of pod ns/pod whose current
// instance is containerID (e.g. "containerd://abc"; empty: whichever runs now), reusing one of
// ours or adding one.
func (h *Helpers) Ensure(ctx context.Context, ns, pod, container, containerID string) (*Helper, error) {
	return h.ensure(ctx, ns, pod, container, containerID, nil)
}

// EnsureGroup is Ensure for a target whose gid the caller has learned, e.g. from the Gid line
// of /proc/1/status (readable to any helper) after a same-user helper could not read
// /proc/1/root: its gid was a guess, and the kernel lets only the same uid and gid in. It
// reuses or adds a same-user helper with that gid; the root+SYS_PTRACE profile ignores it.
func (h *Helpers) EnsureGroup(ctx context.Context, ns, pod, container, containerID string, gid int64) (*Helper, error) {
	return h.ensure(ctx, ns, pod, container, containerID, &gid)
}

func (h *Helpers) ensure(ctx context.Context, ns, pod, container, containerID string, group *int64) (*Helper, error) {
	p, err := h.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading pod %q in namespace %q to add a helper container: %w", pod, ns, err)
	}
	started, err := targetStarted(p, container, containerID)
	if err != nil {
		return nil, err
	}
	uid, gid := targetUser(p, container)
	if group != nil {
		gid = group
	}
	if hp := h.reusable(p, container, started, uid, gid); hp != nil {
		return hp, nil
	}
	// The wait starts with the first patch: the timeout covers the PodSecurity retry too.
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	clk := h.clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	timer := clk.NewTimer(timeout)
	defer timer.Stop()
	hp := &Helper{Namespace: ns, Pod: pod, Container: container, Name: helperName(p), Profile: HelperRootPtrace, Level: "privileged", DryRun: h.DryRun}
	added, err := h.add(ctx, p, hp.Name, container, rootPtraceContext())
	if err != nil {
		level, _, ok := podSecurityRejection(err)
		if !ok {
			return nil, addError(p, err)
		}
		hp.Level = level
		sc, err := sameUserContext(p, container, uid, gid, level)
		if err != nil {
			return nil, err
		}
		hp.Profile, hp.UID, hp.GID = HelperSameUser, sc.RunAsUser, sc.RunAsGroup
		if added, err = h.add(ctx, p, hp.Name, container, sc); err != nil {
			if _, detail, ok := podSecurityRejection(err); ok {
				return nil, fmt.Errorf("adding a helper container to pod %q in namespace %q: PodSecurity %q rejects even a helper running as %s: %s: label the namespace pod-security.kubernetes.io/enforce=privileged, or run with --helper never",
					p.Name, p.Namespace, level, userOf(sc), detail)
			}
			return nil, addError(p, err)
		}
	}
	if h.DryRun {
		return hp, nil
	}
	if err := h.wait(ctx, added, hp, timer.C(), timeout); err != nil {
		return nil, err
	}
	return hp, nil
}

// targetStarted returns when the target container's current instance started; a helper
// started before it lived in a PID namespace the kernel has torn down since.
func targetStarted(p *corev1.Pod, container, containerID string) (metav1.Time, error) {
	st := ContainerStatus(p, container, false)
	if st == nil {
		st = ContainerStatus(p, container, true) // a sidecar: a restartable init container
	}
	switch {
	case p.DeletionTimestamp != nil:
		return metav1.Time{}, fmt.Errorf("container %q of pod %q in namespace %q: %w: the pod is being deleted", container, p.Name, p.Namespace, ErrTargetNotRunning)
	case st == nil || st.State.Running == nil || st.ContainerID == "":
		return metav1.Time{}, fmt.Errorf("container %q of pod %q in namespace %q: %w: wait until it runs", container, p.Name, p.Namespace, ErrTargetNotRunning)
	case containerID != "" && st.ContainerID != containerID:
		return metav1.Time{}, fmt.Errorf("container %q of pod %q in namespace %q: %w as %s: it restarted as %s; sync into the new instance", container, p.Name, p.Namespace, ErrTargetNotRunning, containerID, st.ContainerID)
	}
	return st.State.Running.StartedAt, nil
}

// targetUser returns the uid and gid the target runs as, as far as the API tells: the
// container's securityContext, else the pod's, else the user the kubelet reports it started
// with (status.containerStatuses[].user, where the runtime fills it in). gid is uid when only
// the uid is known, which is a guess: the runtime takes the gid from the image's /etc/passwd
// entry for the uid, and 0 when it has none (measured: a pause-like image run as 65532 runs
// as gid 0, and a helper of 65532:65532 then gets EACCES on /proc/1/root; see EnsureGroup).
func targetUser(p *corev1.Pod, container string) (uid, gid *int64) {
	if c := specContainer(p, container); c != nil && c.SecurityContext != nil {
		uid, gid = c.SecurityContext.RunAsUser, c.SecurityContext.RunAsGroup
	}
	if psc := p.Spec.SecurityContext; psc != nil {
		if uid == nil {
			uid = psc.RunAsUser
		}
		if gid == nil {
			gid = psc.RunAsGroup
		}
	}
	st := ContainerStatus(p, container, false)
	if st == nil {
		st = ContainerStatus(p, container, true)
	}
	if st != nil && st.User != nil && st.User.Linux != nil {
		if u := st.User.Linux; uid == nil || *uid == u.UID {
			uid = ptr.To(u.UID)
			if gid == nil {
				gid = ptr.To(u.GID)
			}
		}
	}
	if uid != nil && gid == nil {
		gid = ptr.To(*uid)
	}
	return uid, gid
}

func specContainer(p *corev1.Pod, name string) *corev1.Container {
	for _, cs := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	return nil
}

// reusable returns the newest helper of ours in p that targets container with our image, runs
// a securityContext Ensure could have added (as uid and gid, for a same-user one), and started
// after the target's current instance.
func (h *Helpers) reusable(p *corev1.Pod, container string, targetStarted metav1.Time, uid, gid *int64) *Helper {
	sameUser := int64(0) // the baseline fallback when no uid is known runs as root
	if uid != nil {
		sameUser = *uid
	}
	for _, ec := range slices.Backward(p.Spec.EphemeralContainers) {
		if !strings.HasPrefix(ec.Name, helperPrefix) || ec.Image != h.Image || ec.TargetContainerName != container {
			continue
		}
		sc := ec.SecurityContext
		if sc == nil || sc.RunAsUser == nil {
			continue
		}
		hp := &Helper{Namespace: p.Namespace, Pod: p.Name, Container: container, Name: ec.Name, Reused: true}
		switch ptrace := hasPtrace(sc); {
		case ptrace && *sc.RunAsUser == 0:
			hp.Profile, hp.Level = HelperRootPtrace, "privileged"
		case !ptrace && *sc.RunAsUser == sameUser && ptr.Equal(sc.RunAsGroup, gid):
			hp.Profile, hp.UID, hp.GID = HelperSameUser, sc.RunAsUser, sc.RunAsGroup
		default:
			continue
		}
		st := ephemeralStatus(p, ec.Name)
		if st == nil || st.State.Running == nil || st.State.Running.StartedAt.Before(&targetStarted) {
			continue
		}
		return hp
	}
	return nil
}

func hasPtrace(sc *corev1.SecurityContext) bool {
	return sc.Capabilities != nil && slices.Contains(sc.Capabilities.Add, "SYS_PTRACE")
}

func ephemeralStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.EphemeralContainerStatuses {
		if p.Status.EphemeralContainerStatuses[i].Name == name {
			return &p.Status.EphemeralContainerStatuses[i]
		}
	}
	return nil
}

// helperName is "livesync-helper-<n>" with the smallest n no container of p is named after:
// names are unique across a pod's containers, and ephemeral ones can never be removed.
func helperName(p *corev1.Pod) string {
	used := map[string]bool{}
	for _, c := range append(slices.Clone(p.Spec.Containers), p.Spec.InitContainers...) {
		used[c.Name] = true
	}
	for _, c := range p.Spec.EphemeralContainers {
		used[c.Name] = true
	}
	for n := 1; ; n++ {
		if name := helperPrefix + strconv.Itoa(n); !used[name] {
			return name
		}
	}
}

func rootPtraceContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsUser:    ptr.To(int64(0)),
		RunAsNonRoot: ptr.To(false),
		Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_PTRACE"}},
	}
}

// sameUserContext is the securityContext of a helper that runs as the target's user, the one
// a PodSecurity level below privileged can admit.
func sameUserContext(p *corev1.Pod, container string, uid, gid *int64, level string) (*corev1.SecurityContext, error) {
	if uid == nil {
		if level == "baseline" {
			// Root with the runtime's default capabilities: baseline admits it, and it reads
			// /proc/1/root only of a target that runs as root too (with no more capabilities).
			// A target of another user shows only in the spec or status, so here it is root
			// or the sync fails with EACCES.
			return &corev1.SecurityContext{RunAsUser: ptr.To(int64(0)), RunAsGroup: gid}, nil
		}
		return nil, fmt.Errorf("pod %q in namespace %q: PodSecurity %q only admits a helper that runs as container %q's user, and %q sets no runAsUser: set securityContext.runAsUser and runAsGroup on it, or use a namespace at level privileged",
			p.Name, p.Namespace, level, container, container)
	}
	sc := &corev1.SecurityContext{
		RunAsUser:                uid,
		RunAsGroup:               gid,
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if *uid != 0 {
		sc.RunAsNonRoot = ptr.To(true)
	}
	return sc, nil
}

func userOf(sc *corev1.SecurityContext) string {
	s := "uid " + strconv.FormatInt(*sc.RunAsUser, 10)
	if sc.RunAsGroup != nil {
		s += " gid " + strconv.FormatInt(*sc.RunAsGroup, 10)
	}
	if sc.Capabilities != nil && slices.Contains(sc.Capabilities.Drop, "ALL") {
		s += " with all capabilities dropped"
	}
	return s
}

// add patches one helper into p's ephemeral containers through the pods/ephemeralcontainers
// subresource, as kubectl debug does, and returns the pod the server answered with.
func (h *Helpers) add(ctx context.Context, p *corev1.Pod, name, container string, sc *corev1.SecurityContext) (*corev1.Pod, error) {
	ec := corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name:            name,
			Image:           h.Image,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         helperSleep,
			SecurityContext: sc,
		},
		TargetContainerName: container,
	}
	body, err := json.Marshal(map[string]any{"spec": map[string]any{"ephemeralContainers": []corev1.EphemeralContainer{ec}}})
	if err != nil {
		return nil, fmt.Errorf("encoding the helper container of pod %q: %w", p.Name, err)
	}
	opts := metav1.PatchOptions{FieldManager: FieldManager}
	if h.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return h.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, body, opts, "ephemeralcontainers")
}

// podSecurityRE matches the PodSecurity admission's rejection, `violates PodSecurity
// "baseline:latest": non-default capabilities (...)`.
var podSecurityRE = regexp.MustCompile(`violates PodSecurity "([^":]+):[^"]*": ?(.*)`)

// podSecurityRejection returns the level named by a PodSecurity rejection and what it found.
func podSecurityRejection(err error) (level, detail string, ok bool) {
	if !apierrors.IsForbidden(err) {
		return "", "", false
	}
	m := podSecurityRE.FindStringSubmatch(err.Error())
	if m == nil {
		return "", "", false
	}
	return m[1], firstLine(m[2]), true
}

// addError words a failed patch that is no PodSecurity rejection.
func addError(p *corev1.Pod, err error) error {
	if apierrors.IsForbidden(err) {
		if strings.Contains(err.Error(), "admission webhook") {
			return fmt.Errorf("adding a helper container to pod %q in namespace %q: refused by an admission webhook: %s: ask for an exception, or run with --helper never", p.Name, p.Namespace, firstLine(err.Error()))
		}
		return fmt.Errorf("adding a helper container to pod %q in namespace %q: not allowed: grant the RBAC verb \"patch\" on \"pods/ephemeralcontainers\", or run with --helper never", p.Name, p.Namespace)
	}
	return fmt.Errorf("adding a helper container to pod %q in namespace %q: %s", p.Name, p.Namespace, firstLine(err.Error()))
}

// errHelperTimeout cancels the wait when the helper took longer than Timeout.
var errHelperTimeout = errors.New("helper timeout")

// helperFailures are waiting reasons that will not go away by themselves.
var helperFailures = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError"}

// wait watches the pod until the helper runs or expired fires, and fails at once on a reason
// that does not clear by itself.
func (h *Helpers) wait(ctx context.Context, added *corev1.Pod, hp *Helper, expired <-chan time.Time, timeout time.Duration) error {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-expired:
			cancel(errHelperTimeout)
		case <-wctx.Done():
		}
	}()

	where := fmt.Sprintf("helper container %q in pod %q of namespace %q", hp.Name, hp.Pod, hp.Namespace)
	state := "no status yet"
	done := func(p *corev1.Pod) (bool, error) {
		st := ephemeralStatus(p, hp.Name)
		switch {
		case st == nil:
			return false, nil
		case st.State.Running != nil:
			return true, nil
		case st.State.Terminated != nil:
			t := st.State.Terminated
			return false, fmt.Errorf("%s exited with code %d (%s: %s): image %q must run `sleep`; use one with sleep, sh and tar such as busybox, or run with --helper never",
				where, t.ExitCode, t.Reason, firstLine(t.Message), h.Image)
		case st.State.Waiting != nil:
			w := st.State.Waiting
			if slices.Contains(helperFailures, w.Reason) {
				return false, fmt.Errorf("%s cannot start image %q: %s: %s: use a helper image the cluster can pull and run, or run with --helper never",
					where, h.Image, w.Reason, firstLine(w.Message))
			}
			if w.Reason != "" {
				state = w.Reason
			}
		}
		return false, nil
	}
	if added != nil {
		if ok, err := done(added); ok || err != nil {
			return err
		}
	}

	_, err := watchtools.UntilWithSync(wctx, podWatch(h.Client, hp.Namespace, hp.Pod), &corev1.Pod{}, nil, func(e watch.Event) (bool, error) {
		p, ok := e.Object.(*corev1.Pod)
		if !ok || p.Name != hp.Pod {
			return false, nil
		}
		if e.Type == watch.Deleted {
			return false, fmt.Errorf("pod %q in namespace %q was deleted while its helper container started", hp.Pod, hp.Namespace)
		}
		return done(p)
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(context.Cause(wctx), errHelperTimeout):
		return fmt.Errorf("%s is not running after %s (%s): see kubectl describe pod %s -n %s",
			where, timeout, state, hp.Pod, hp.Namespace)
	case ctx.Err() != nil:
		return fmt.Errorf("stopped waiting for %s: %w", where, ctx.Err())
	}
	return err
}
