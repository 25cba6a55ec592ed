package remote

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/testwait"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilexec "k8s.io/client-go/util/exec"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/internal/localexec"
)

func TestClassify(t *testing.T) {
	podsExec := schema.GroupResource{Resource: "pods/exec"}
	tests := []struct {
		name      string
		err       error
		stderr    string
		kind      error
		transient bool
		msg       string
	}{
		{name: "tar missing", err: localexec.ExitCode(127), stderr: "livesync: tar not found\n",
			kind: ErrTarMissing, msg: `tar not found in container "app" of pod "web-1": the image needs sh and tar`},
		{name: "tar missing via client-go", err: utilexec.CodeExitError{Err: errors.New("command terminated with exit code 127"), Code: 127},
			stderr: "livesync: tar not found\n", kind: ErrTarMissing, msg: "tar not found"},
		{name: "sh missing", err: errors.New(`OCI runtime exec failed: exec failed: unable to start container process: exec: "sh": executable file not found in $PATH: unknown`),
			kind: ErrTarMissing, msg: `sh not found in container "app" of pod "web-1": the image needs sh and tar`},
		{name: "permission denied", err: localexec.ExitCode(2),
			stderr: "tar: ./a: Cannot open: Permission denied\nlivesync: tar failed\nlivesync: uid 1000\n",
			kind:   ErrPermission, msg: `copying files: permission denied writing "/app" in container "app" of pod "web-1" (running as uid 1000): make "/app" writable`},
		{name: "read-only", err: localexec.ExitCode(1), stderr: "mkdir: can't create directory '/app': Read-only file system\nlivesync: mkdir failed\n",
			kind: ErrReadOnly, msg: `mount an emptyDir volume at "/app"`},
		{name: "exec forbidden", err: apierrors.NewForbidden(podsExec, "web-1", errors.New(`User "dev" cannot create resource "pods/exec"`)),
			kind: ErrExecForbidden, msg: `grant the RBAC verbs "create" and "get" on "pods/exec"`},
		{name: "exec denied by an admission policy", err: errors.New(`unable to upgrade connection: pods "web-1" is forbidden: ValidatingAdmissionPolicy 'deny-exec' with binding 'deny-exec' denied request: no exec in this namespace`),
			kind: ErrExecForbidden, msg: `copying files: an admission policy denies exec into pod "web-1" in namespace "ns": no exec in this namespace: ask for an exception to the policy, or use a namespace that allows exec`},
		{name: "pod gone", err: apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "web-1"),
			kind: ErrTargetGone, transient: true, msg: "is gone"},
		{name: "container gone", err: errors.New(`container not found ("app")`), kind: ErrTargetGone, transient: true},
		{name: "connection drop", err: errors.New("error dialing backend: EOF"), transient: true, msg: "copying files in container"},
		{name: "helper", err: HelperError(apierrors.NewForbidden(podsExec, "web-1", errors.New("helper: grant patch"))),
			kind: ErrHelper, msg: "helper: grant patch"},
		{name: "other exit code", err: localexec.ExitCode(2), stderr: "tar: short read\nlivesync: tar failed\nlivesync: uid 0\n",
			msg: `copying files in container "app" of pod "web-1": exit code 2: tar: short read`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Classify(tt.err, testTarget, "copying files", "/app", tt.stderr)
			var se *SyncError
			if !errors.As(err, &se) {
				t.Fatalf("classify = %T %v", err, err)
			}
			if tt.kind != nil && !errors.Is(err, tt.kind) || tt.kind == nil && se.Kind != nil {
				t.Errorf("kind = %v, want %v", se.Kind, tt.kind)
			}
			if !errors.Is(err, tt.err) {
				t.Error("underlying error not wrapped")
			}
			if IsTransient(err) != tt.transient {
				t.Errorf("IsTransient = %v, want %v", !tt.transient, tt.transient)
			}
			if !strings.Contains(err.Error(), tt.msg) || strings.Contains(err.Error(), "\n") {
				t.Errorf("message %q lacks %q or spans lines", err, tt.msg)
			}
		})
	}
	if err := Classify(context.Canceled, testTarget, "x", "/app", ""); !errors.Is(err, context.Canceled) {
		t.Errorf("cancellation classified as %v", err)
	}
}

func TestIsTransientRaw(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{errors.New("connection reset by peer"), true},
		{localexec.ExitCode(1), false},
		{apierrors.NewForbidden(schema.GroupResource{Resource: "pods/exec"}, "p", errors.New("no")), false},
	}
	for _, tt := range tests {
		if got := IsTransient(tt.err); got != tt.want {
			t.Errorf("IsTransient(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestRetry(t *testing.T) {
	transient := errors.New("connection reset")
	tests := []struct {
		name      string
		errs      []error // returned by successive tries
		wantTries int
		wantWaits []time.Duration
		wantErr   error
	}{
		{name: "success", errs: []error{nil}, wantTries: 1},
		{name: "transient then success", errs: []error{transient, nil}, wantTries: 2,
			wantWaits: []time.Duration{100 * time.Millisecond}},
		{name: "gives up after three tries", errs: []error{transient, transient, transient, nil}, wantTries: 3,
			wantWaits: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, wantErr: transient},
		{name: "deterministic is not retried", errs: []error{localexec.ExitCode(2), nil}, wantTries: 1, wantErr: localexec.ExitCode(2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := clocktesting.NewFakeClock(time.Unix(0, 0))
			tries := 0
			done := make(chan error)
			go func() {
				done <- DefaultRetry.Do(context.Background(), fc, func() error {
					tries++
					return tt.errs[tries-1]
				})
			}()
			for _, w := range tt.wantWaits {
				testwait.Waiters(t, fc, 1)
				fc.Step(w - time.Nanosecond)
				if !fc.HasWaiters() {
					t.Fatalf("backoff shorter than %v", w)
				}
				fc.Step(time.Nanosecond)
			}
			if err := <-done; !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			if tries != tt.wantTries {
				t.Errorf("tries = %d, want %d", tries, tt.wantTries)
			}
		})
	}
}
