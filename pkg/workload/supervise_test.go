package workload

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// fakeEntrypoints answers Entrypoint from a map by image; a missing image is an error.
type fakeEntrypoints map[string][2][]string

func (f fakeEntrypoints) Entrypoint(_ context.Context, img string) ([]string, []string, error) {
	e, ok := f[img]
	if !ok {
		return nil, nil, errors.New("not found")
	}
	return e[0], e[1], nil
}

// TestSuperviseArgv: the supervisor runs what the container ran: the template's command (its
// args stay args), else the image's entrypoint, with the image's cmd unless args replace it.
func TestSuperviseArgv(t *testing.T) {
	images := fakeEntrypoints{"example.com/app:dev": {{"/entry"}, {"serve", "--port", "80"}}, "example.com/none:dev": {nil, nil},
		"example.com/dollar:dev": {{"/bin/sh", "-c"}, {"echo $HOME"}}}
	for _, tc := range []struct {
		name          string
		command, args []string
		image         string
		want          []string
		err           string
	}{
		{"pod command", []string{"/server", "-v"}, []string{"--port", "81"}, "example.com/app:dev", []string{"/server", "-v"}, ""},
		{"image entrypoint and cmd", nil, nil, "example.com/app:dev", []string{"/entry", "serve", "--port", "80"}, ""},
		{"pod command with expansions", []string{"/bin/sh", "-c", "echo $$HOME $(PORT)"}, nil, "example.com/app:dev", []string{"/bin/sh", "-c", "echo $$HOME $(PORT)"}, ""},
		{"image entrypoint with a $", nil, nil, "example.com/dollar:dev", []string{"/bin/sh", "-c", "echo $$HOME"}, ""},
		{"image entrypoint, pod args", nil, []string{"--port", "81"}, "example.com/app:dev", []string{"/entry"}, ""},
		{"nothing to run", nil, nil, "example.com/none:dev", nil, "neither the pod template nor the image"},
		{"registry error", nil, nil, "example.com/gone:dev", nil, "reading the entrypoint of container \"app\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := testDeployment()
			c := &d.Spec.Template.Spec.Containers[0]
			c.Command, c.Args, c.Image = tc.command, tc.args, tc.image
			w := mustWorkload(t, d)
			p, err := PlanSupervise(context.Background(), w, []string{"app"}, images)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("PlanSupervise error = %v, want %q", err, tc.err)
				}
				return
			}
			must(t, err)
			if !slices.Equal(p.Argv["app"], tc.want) {
				t.Fatalf("argv = %q, want %q", p.Argv["app"], tc.want)
			}
			patch, err := p.Patch()
			must(t, err)
			got := applyPatch(t, d, patch.Data)
			gc := got.Spec.Template.Spec.Containers[0]
			if inner, ok := remote.Supervised(gc.Command); !ok || !slices.Equal(inner, tc.want) || !slices.Equal(gc.Args, tc.args) {
				t.Fatalf("patched command %q args %q", gc.Command, gc.Args)
			}
			// The kubelet expands $$ to $: the script it runs is the supervisor's own.
			if want := remote.SupervisorCommand(nil)[2]; strings.ReplaceAll(gc.Command[2], "$$", "$") != want || !strings.Contains(gc.Command[2], "$$") {
				t.Fatalf("the supervisor's script is not escaped for the kubelet's expansion")
			}
			if gs := got.Spec.Template.Spec.Containers[1]; gs.Command != nil {
				t.Fatalf("the sidecar's command changed: %q", gs.Command)
			}

			// Installing again changes nothing; restore puts the template's command back.
			w2 := mustWorkload(t, got)
			again, err := PlanSupervise(context.Background(), w2, []string{"app"}, images)
			must(t, err)
			if p2, err := again.Patch(); err != nil || p2 != nil || !slices.Equal(again.Already, []string{"app"}) {
				t.Fatalf("second install: patch %v, %v, already %q", p2, err, again.Already)
			}
			rp, err := PlanRestore(w2, false)
			must(t, err)
			rpatch, err := rp.Patch()
			must(t, err)
			back := applyPatch(t, got, rpatch.Data)
			bc := back.Spec.Template.Spec.Containers[0]
			if !slices.Equal(bc.Command, tc.command) || !slices.Equal(bc.Args, tc.args) || bc.Image != tc.image {
				t.Fatalf("restored command %q args %q image %s; want %q %q %s", bc.Command, bc.Args, bc.Image, tc.command, tc.args, tc.image)
			}
			if _, ok := back.Annotations[OriginalAnnotation]; ok {
				t.Fatalf("restore left the record: %s", back.Annotations[OriginalAnnotation])
			}
		})
	}
}

// TestSuperviseRefusals: kinds whose command cannot roll out, and init containers.
func TestSuperviseRefusals(t *testing.T) {
	images := fakeEntrypoints{}
	w := mustWorkload(t, testDeployment())
	if _, err := PlanSupervise(context.Background(), w, []string{"setup"}, images); err == nil || !strings.Contains(err.Error(), "init container") {
		t.Errorf("init container: %v", err)
	}
	pod := *w
	pod.Kind = KindPod
	if _, err := PlanSupervise(context.Background(), &pod, []string{"app"}, images); err == nil || !strings.Contains(err.Error(), "a running Pod's command cannot change") {
		t.Errorf("pod: %v", err)
	}
}

// TestRestoreSupervisorConflict: a command someone set after livesync wrapped it is theirs:
// left as is without --force, the original with it.
func TestRestoreSupervisorConflict(t *testing.T) {
	d := testDeployment()
	d.Spec.Template.Spec.Containers[0].Command = []string{"/server"}
	w := mustWorkload(t, d)
	p, err := PlanSupervise(context.Background(), w, []string{"app"}, fakeEntrypoints{})
	must(t, err)
	patch, err := p.Patch()
	must(t, err)
	got := applyPatch(t, d, patch.Data)
	got.Spec.Template.Spec.Containers[0].Command = []string{"/other"}
	w2 := mustWorkload(t, got)
	rp, err := PlanRestore(w2, false)
	must(t, err)
	if s := rp.Steps[0]; !s.Skipped || !strings.Contains(s.Conflict, `command changed since livesync wrapped it in its supervisor (now ["/other"])`) {
		t.Fatalf("step = %+v", s)
	}
	rp, err = PlanRestore(w2, true)
	must(t, err)
	rpatch, err := rp.Patch()
	must(t, err)
	if back := applyPatch(t, got, rpatch.Data); !slices.Equal(back.Spec.Template.Spec.Containers[0].Command, []string{"/server"}) {
		t.Fatalf("--force restored %q", back.Spec.Template.Spec.Containers[0].Command)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
