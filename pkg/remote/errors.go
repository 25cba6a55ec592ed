package remote

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Sentinels for failures that need a decision. Match them with errors.Is.
var (
	// ErrTarMissing: the image lacks sh or tar. Not retried.
	ErrTarMissing = errors.New("tar or sh not found in the container")
	// ErrPermission: the container user may not write the remote directory. Not retried.
	ErrPermission = errors.New("permission denied in the container")
	// ErrReadOnly: the remote directory is on a read-only file system. Not retried.
	ErrReadOnly = errors.New("read-only file system in the container")
	// ErrExecForbidden: RBAC does not allow pods/exec. Not retried.
	ErrExecForbidden = errors.New("exec into the pod is forbidden")
	// ErrTargetGone: the pod or container went away mid-exec. Transient; the
	// target is usually removed soon after.
	ErrTargetGone = errors.New("container is gone")
	// ErrTimeout: an exec ran past its deadline (see Limit and ExecWithin) and
	// was cancelled: a frozen or overloaded container, or a dead connection.
	// Transient.
	ErrTimeout = errors.New("remote call timed out")
	// ErrTypeConflict: a mapping's root is a directory on one side and not on
	// the other. Deleting either to make room could destroy a volume, so it is
	// refused. Not retried.
	ErrTypeConflict = errors.New("file and directory at a mapping's root")
	// ErrHelper: a helper container could not be added, or can't reach the
	// target's files (see HelperArgv and pkg/workload). Not retried.
	ErrHelper = errors.New("no helper container")
)

// HelperError marks err, a helper container's failure that retrying won't
// fix, as ErrHelper; its message is the error's own.
func HelperError(err error) error { return &helperError{err} }

type helperError struct{ err error }

func (h *helperError) Error() string        { return h.err.Error() }
func (h *helperError) Unwrap() error        { return h.err }
func (h *helperError) Is(target error) bool { return target == ErrHelper }

// SyncError is a classified failure of one exec in one target. Its message is
// one line: what failed, then what to do about it.
type SyncError struct {
	Kind      error  // one of the Err* sentinels; nil when unclassified
	Target    Target // where it failed
	Op        string // e.g. "applying changes", "listing files"
	Msg       string // what failed
	Hint      string // what to do; may be empty
	Stderr    string // the tail of the remote stderr
	Err       error  // the Executor's error
	transient bool
}

// Error returns the one-line message: what failed, then the hint.
func (e *SyncError) Error() string {
	if e.Hint == "" {
		return e.Msg
	}
	return e.Msg + ": " + e.Hint
}

// Unwrap returns the sentinel and the underlying error.
func (e *SyncError) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

// IsTransient reports whether retrying err may succeed: dropped connections,
// a pod going away, an apiserver hiccup. Exit codes, missing tools,
// permissions and RBAC are deterministic.
func IsTransient(err error) bool {
	var se *SyncError
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.As(err, &se):
		return se.transient
	}
	var ee ExitError
	return !errors.As(err, &ee) && !apierrors.IsForbidden(err)
}

// Remote scripts mark their own failures on stderr with these.
const (
	markerTarMissing = "livesync: tar not found"
	markerUID        = "livesync: uid "
	// markerIsDir: a file mapping's remote path is a directory.
	markerIsDir = "livesync: conflict: a directory"
	// markerNotDir: a directory mapping's remote root is not a directory.
	markerNotDir = "livesync: conflict: not a directory"
	// markerSymlink: a directory listed in the container turned into a
	// symlink before its entries were deleted.
	markerSymlink = "livesync: symlink in the way: "
)

// IsNotDirConflict reports whether se, an ErrTypeConflict, is a directory
// expected at the remote root that is something else there (apply.sh's
// marker); otherwise a file was expected where a directory is.
func IsNotDirConflict(se *SyncError) bool { return strings.Contains(se.Stderr, markerNotDir) }

var uidRE = regexp.MustCompile(markerUID + `(\S+)`)

// HintNoTar: without --helper never, such a container is synced through a helper.
const HintNoTar = "the image needs sh and tar, or sync through a helper container: --helper auto (the default) or ephemeral"

// Classify turns an Executor error into a *SyncError with advice. dir is the
// remote directory the exec worked on.
func Classify(err error, t Target, op string, dir string, stderr string) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	where := fmt.Sprintf("container %q of pod %q", t.Container, t.Pod)
	se := &SyncError{Target: t, Op: op, Stderr: stderr, Err: err}
	msg := err.Error()
	var ee ExitError
	exit := -1
	if errors.As(err, &ee) {
		exit = ee.ExitStatus()
	}
	uid := "unknown"
	if m := uidRE.FindStringSubmatch(stderr); m != nil {
		uid = m[1]
	}
	switch {
	case errors.Is(err, ErrHelper):
		se.Kind, se.Msg = ErrHelper, msg
	case errors.Is(err, ErrTimeout):
		se.Kind, se.transient = ErrTimeout, true
		se.Msg = fmt.Sprintf("%s in %s %v", op, where, err)
		se.Hint = "the container may be frozen or overloaded; livesync will retry and re-sync"
	case (apierrors.IsForbidden(err) || strings.Contains(msg, "forbidden")) && containsAny(msg, "admission", "denied request", "denied the request"):
		// RBAC allowed the exec and an admission policy (a ValidatingAdmissionPolicy, a
		// webhook: Kyverno, Gatekeeper) refused its CONNECT: no Role fixes that.
		se.Kind = ErrExecForbidden
		se.Msg = fmt.Sprintf("%s: an admission policy denies exec into pod %q in namespace %q: %s", op, t.Pod, t.Namespace, admissionMessage(msg))
		se.Hint = "ask for an exception to the policy, or use a namespace that allows exec"
	case apierrors.IsForbidden(err) || strings.Contains(msg, "forbidden") && strings.Contains(msg, "exec"):
		se.Kind = ErrExecForbidden
		se.Msg = fmt.Sprintf("%s: not allowed to exec into pod %q in namespace %q", op, t.Pod, t.Namespace)
		se.Hint = `grant the RBAC verbs "create" and "get" on "pods/exec"`
	case strings.Contains(stderr, markerIsDir) || strings.Contains(stderr, markerNotDir):
		// The caller rewrites the message with what it mapped there (see
		// IsNotDirConflict).
		se.Kind = ErrTypeConflict
		se.Msg = fmt.Sprintf("%s: type conflict at %q in %s", op, dir, where)
	case strings.Contains(stderr, markerSymlink):
		// The next initial sync lists it again and sees the link.
		se.transient = true
		se.Msg = fmt.Sprintf("%s in %s: a directory under %q became a symlink during the sync; nothing was deleted through it", op, where, dir)
	case strings.Contains(stderr, markerTarMissing) || exit == 127 && strings.Contains(stderr, "tar"):
		se.Kind = ErrTarMissing
		se.Msg = fmt.Sprintf("tar not found in %s", where)
		se.Hint = HintNoTar
	case strings.Contains(msg, "executable file not found") || exit == 127:
		se.Kind = ErrTarMissing
		se.Msg = fmt.Sprintf("sh not found in %s", where)
		se.Hint = HintNoTar
	case strings.Contains(stderr, "Read-only file system"):
		se.Kind = ErrReadOnly
		se.Msg = fmt.Sprintf("%s: %q is on a read-only file system in %s", op, dir, where)
		se.Hint = fmt.Sprintf("mount an emptyDir volume at %q", dir)
	case strings.Contains(stderr, "Permission denied"):
		se.Kind = ErrPermission
		se.Msg = fmt.Sprintf("%s: permission denied writing %q in %s (running as uid %s)", op, dir, where, uid)
		se.Hint = PermissionHint(dir)
	case apierrors.IsNotFound(err) || exit == 137 || containsAny(msg,
		"container not found", "No such container", "not running", "stopped container", "does not exist"):
		se.Kind, se.transient = ErrTargetGone, true
		se.Msg = fmt.Sprintf("%s: %s is gone: %v", op, where, err)
	case exit >= 0:
		se.Msg = fmt.Sprintf("%s in %s: exit code %d: %s", op, where, exit, lastLine(stderr, msg))
	default:
		se.transient = true
		se.Msg = fmt.Sprintf("%s in %s: %v", op, where, err)
	}
	return se
}

// admissionMessage is the policy's own words from an admission denial: what follows the last
// "denied request: " (or the whole first line).
func admissionMessage(msg string) string {
	msg = strings.SplitN(msg, "\n", 2)[0]
	if i := strings.LastIndex(msg, "denied request: "); i >= 0 {
		return msg[i+len("denied request: "):]
	}
	return msg
}

// PermissionHint says what to do about a remote directory its user may not write.
func PermissionHint(dir string) string {
	return fmt.Sprintf("make %q writable for that user (mount an emptyDir volume there, set fsGroup, or set runAsUser), or write it from a root helper container: --helper ephemeral", dir)
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// lastLine returns the last non-empty line of s that is not a livesync
// marker, or def.
func lastLine(s, def string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "livesync:") {
			return l
		}
	}
	return def
}

// TailBuffer keeps the last Max bytes written to it (stderr of a failed tar
// can be long; the markers come last).
type TailBuffer struct {
	Max int
	b   []byte
	cut bool // bytes were dropped
}

// Write keeps p, dropping what lies more than Max bytes back.
func (t *TailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.Max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.Max:]...)
		t.cut = true
	}
	return len(p), nil
}

// Truncated reports whether String misses the start of what was written.
func (t *TailBuffer) Truncated() bool { return t.cut || len(t.b) > t.Max }

// String returns the last Max bytes written.
// String returns the last Max bytes written.
func (t *TailBuffer) String() string {
	if len(t.b) > t.Max {
		return string(t.b[len(t.b)-t.Max:])
	}
	return string(t.b)
}
