package cmd

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

const (
	devImage    = "127.0.0.1:1/app:dev"
	pinnedImage = "127.0.0.1:1/app:dev@sha256:0000000000000000000000000000000000000000000000000000000000000001"
	userImage   = "127.0.0.1:1/app:v2"
	sideImage   = "127.0.0.1:1/side:dev"
	sidePinned  = "127.0.0.1:1/side:dev@sha256:0000000000000000000000000000000000000000000000000000000000000002"
)

// recorded is the annotation refresh writes after pinning app (and sidecar) to a digest.
const recorded = `{"app":{"image":"` + devImage + `","imagePullPolicy":"IfNotPresent","set":{"image":"` + pinnedImage + `","imagePullPolicy":"IfNotPresent"}},` +
	`"sidecar":{"image":"` + sideImage + `","imagePullPolicy":"IfNotPresent","set":{"image":"` + sidePinned + `","imagePullPolicy":"IfNotPresent"}}}`

// imageDeployment is deployment apps/web with containers app and sidecar at the given images
// (IfNotPresent) and the livesync annotation set to annotation ("" for none).
func imageDeployment(annotation, app, sidecar string) *appsv1.Deployment {
	d := deployment("apps", "web")
	d.Spec.Template.Spec.InitContainers = nil
	d.Spec.Template.Spec.Containers = []corev1.Container{
		{Name: "app", Image: app, ImagePullPolicy: corev1.PullIfNotPresent},
		{Name: "sidecar", Image: sidecar, ImagePullPolicy: corev1.PullIfNotPresent},
	}
	if annotation != "" {
		d.Annotations = map[string]string{workload.OriginalAnnotation: annotation}
	}
	return d
}

func images(d *appsv1.Deployment) []string {
	var out []string
	for _, c := range d.Spec.Template.Spec.Containers {
		out = append(out, c.Image)
	}
	return out
}

// TestRestoreLeavesWhatSomeoneElseChanged: after refresh pinned app and sidecar, someone ran
// `kubectl set image deploy/web app=app:v2`. restore puts sidecar back, leaves app as the user
// set it with one line saying so, keeps app's record for --force, and exits 0; --force puts
// app back too; --dry-run shows the same decisions and persists nothing.
func TestRestoreLeavesWhatSomeoneElseChanged(t *testing.T) {
	skipLine := `deployment/web: container "app": image changed since livesync pinned it (now ` + userImage + `); left as is, use --force to restore ` + devImage + ` anyway`
	cases := []struct {
		name       string
		args       []string
		wantOut    []string
		wantImages []string
		// wantRecord is the annotation after the command; "" means removed.
		wantRecord string
		dryRun     bool
	}{
		{
			name:       "changed container left, other restored",
			args:       []string{"restore", "deployment/web", "--no-wait"},
			wantOut:    []string{skipLine, `deployment/web: container "sidecar": image ` + sidePinned + ` -> ` + sideImage},
			wantImages: []string{userImage, sideImage},
			wantRecord: `{"app":{"image":"` + devImage + `","imagePullPolicy":"IfNotPresent","set":{"image":"` + pinnedImage + `","imagePullPolicy":"IfNotPresent"}}}`,
		},
		{
			name: "force",
			args: []string{"restore", "deployment/web", "--no-wait", "--force"},
			wantOut: []string{
				`deployment/web: container "app": image changed since livesync pinned it (now ` + userImage + `); restoring anyway (--force)`,
				`deployment/web: container "app": image ` + userImage + ` -> ` + devImage,
				`deployment/web: container "sidecar": image ` + sidePinned + ` -> ` + sideImage,
			},
			wantImages: []string{devImage, sideImage},
		},
		{
			name:    "dry run",
			args:    []string{"restore", "deployment/web", "--dry-run"},
			wantOut: []string{skipLine, `deployment/web: container "sidecar": image ` + sidePinned + ` -> ` + sideImage, "dry run, nothing changed"},
			dryRun:  true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := imageDeployment(recorded, userImage, sidePinned)
			out, after, patches, err := runImageCommand(t, d, tc.args...)
			if err != nil {
				t.Fatalf("restore: %v\n%s", err, out)
			}
			for _, want := range tc.wantOut {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if tc.dryRun {
				for _, p := range patches {
					if len(p.PatchOptions.DryRun) == 0 {
						t.Errorf("--dry-run sent a real patch: %s", p.GetPatch())
					}
				}
				return
			}
			if got := strings.Join(images(after), " "); got != strings.Join(tc.wantImages, " ") {
				t.Errorf("images after restore = %s, want %s", got, strings.Join(tc.wantImages, " "))
			}
			if got := after.Annotations[workload.OriginalAnnotation]; got != tc.wantRecord {
				t.Errorf("annotation after restore = %q, want %q", got, tc.wantRecord)
			}
		})
	}

	// Nothing restorable: no patch at all, the record stays whole, exit 0.
	d := imageDeployment(`{"app":{"image":"`+devImage+`","imagePullPolicy":"IfNotPresent","set":{"image":"`+pinnedImage+`","imagePullPolicy":"IfNotPresent"}}}`, userImage, sideImage)
	out, after, patches, err := runImageCommand(t, d, "restore", "deployment/web")
	if err != nil || len(patches) != 0 || after.Annotations[workload.OriginalAnnotation] != d.Annotations[workload.OriginalAnnotation] {
		t.Errorf("restore with only a changed container: err %v, %d patches, annotation %q", err, len(patches), after.Annotations[workload.OriginalAnnotation])
	}
	if !strings.Contains(out, skipLine) || !strings.Contains(out, "nothing restored; the record is kept for restore --force") {
		t.Errorf("output:\n%s", out)
	}
}

// TestRestoreLegacyRecord: an annotation written before "set" existed still restores a
// digest-pinned form of the original tag, and treats any other image as someone else's.
func TestRestoreLegacyRecord(t *testing.T) {
	legacy := `{"app":{"image":"` + devImage + `","imagePullPolicy":"IfNotPresent"}}`
	_, after, _, err := runImageCommand(t, imageDeployment(legacy, pinnedImage, sideImage), "restore", "deployment/web", "--no-wait")
	if err != nil || images(after)[0] != devImage || after.Annotations[workload.OriginalAnnotation] != "" {
		t.Errorf("legacy record over a pinned form: err %v, images %q, annotation %q", err, images(after), after.Annotations[workload.OriginalAnnotation])
	}
	out, after, _, err := runImageCommand(t, imageDeployment(legacy, userImage, sideImage), "restore", "deployment/web", "--no-wait")
	if err != nil || images(after)[0] != userImage || after.Annotations[workload.OriginalAnnotation] != legacy || !strings.Contains(out, "left as is") {
		t.Errorf("legacy record under another tag: err %v, images %q, annotation %q\n%s", err, images(after), after.Annotations[workload.OriginalAnnotation], out)
	}
}

// TestMalformedRecordRefused: an annotation of the wrong shape ("null" left refresh and
// pull-policy writing into a nil map) is one error line for every command that writes or reads
// it, and nothing is patched.
func TestMalformedRecordRefused(t *testing.T) {
	for _, raw := range []string{"null", "[]", `"x"`, `{"app":null}`} {
		for _, args := range [][]string{
			{"restore", "deployment/web"},
			{"restore", "deployment/web", "--force"},
			{"pull-policy", "deployment/web", "Always"},
			{"refresh", "deployment/web"},
			{"inspect", "deployment/web"},
		} {
			t.Run(raw+" "+strings.Join(args, " "), func(t *testing.T) {
				_, after, patches, err := runImageCommand(t, imageDeployment(raw, pinnedImage, sideImage), args...)
				if err == nil || !strings.Contains(err.Error(), "annotation livesync.dev/original on deployment/web is not what livesync writes") ||
					!strings.Contains(err.Error(), "kubectl annotate -n apps deployment/web livesync.dev/original-") {
					t.Errorf("error = %v", err)
				}
				if err != nil && strings.Contains(err.Error(), "\n") {
					t.Errorf("error is not one line: %q", err)
				}
				if len(patches) != 0 || after.Annotations[workload.OriginalAnnotation] != raw {
					t.Errorf("refused command patched: %d patches, annotation %q", len(patches), after.Annotations[workload.OriginalAnnotation])
				}
			})
		}
	}
}
