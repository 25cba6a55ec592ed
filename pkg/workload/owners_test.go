package workload

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	restfake "k8s.io/client-go/rest/fake"
	"k8s.io/kubectl/pkg/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// entry is a managedFields entry of apps/v1 owning the given fields of container "app" (and,
// with "replicas", spec.replicas: every chart sets something besides the image).
func entry(manager, op string, fields ...string) metav1.ManagedFieldsEntry {
	app := map[string]any{}
	spec := map[string]any{"f:template": map[string]any{"f:spec": map[string]any{"f:containers": map[string]any{`k:{"name":"app"}`: app}}}}
	for _, f := range fields {
		if f == "replicas" {
			spec["f:replicas"] = map[string]any{}
			continue
		}
		app["f:"+f] = map[string]any{}
	}
	if len(app) == 0 {
		delete(spec, "f:template")
	}
	raw, _ := json.Marshal(map[string]any{"f:spec": spec})
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationType(op), APIVersion: "apps/v1",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(string(raw))}
}

// owned returns who owns container "app"'s field in entries, as "manager/Operation". It reads
// the sets itself, apart from the code under test.
func owned(t *testing.T, entries []metav1.ManagedFieldsEntry, field string) []string {
	t.Helper()
	p := fieldpath.MakePathOrDie("spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "app"), field)
	var out []string
	for _, e := range entries {
		if len(e.FieldsV1.GetRawBytes()) == 0 || e.FieldsV1.GetRawString() == "{}" {
			t.Errorf("entry %s/%s owns nothing; the API server drops such entries", e.Manager, e.Operation)
		}
		var s fieldpath.Set
		if err := s.FromJSON(e.FieldsV1.GetRawReader()); err != nil {
			t.Fatalf("entry %s: %v", e.Manager, err)
		}
		if s.Has(p) {
			out = append(out, e.Manager+"/"+string(e.Operation))
		}
	}
	return out
}

// TestDescribeGiven: one line per owner, each container's fields together.
func TestDescribeGiven(t *testing.T) {
	got := describeGiven(map[string][][2]string{
		"helm (Apply)":               {{`container "app"`, FieldImage}, {`container "app"`, FieldPullPolicy}, {`image volume "data"`, FieldImage}},
		"argocd-controller (Update)": {{`container "web"`, FieldImage}},
	})
	want := []string{`container "app" image and imagePullPolicy, image volume "data" image to helm (Apply)`, `container "web" image to argocd-controller (Update)`}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("describeGiven = %q, want %q", got, want)
	}
}

// TestBuildPatchRecordsOwners: the first change of a field records who owned it then (Helm,
// by server-side apply); a later change of the same field keeps that record, though livesync
// owns the field by then, and a change of another field records that field's owners.
func TestBuildPatchRecordsOwners(t *testing.T) {
	d := testDeployment()
	d.ManagedFields = []metav1.ManagedFieldsEntry{entry("helm", "Apply", "replicas", "image", "imagePullPolicy"), entry("kube-controller-manager", "Update", "replicas")}
	w := mustWorkload(t, d)
	cs, _ := w.Containers([]string{"app"})
	p, err := BuildPatch(w, []Change{{Container: cs[0], Image: "example.com/app:dev@sha256:abc"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	d = applyPatch(t, d, p.Data)
	want := `"owners":{"image":[{"manager":"helm","operation":"Apply","apiVersion":"apps/v1"}]}`
	if got := d.Annotations[OriginalAnnotation]; !strings.Contains(got, want) {
		t.Fatalf("record after refresh = %s, want it to hold %s", got, want)
	}
	// What the API server did to the owners: livesync's update took the image from Helm.
	d.ManagedFields = []metav1.ManagedFieldsEntry{entry("helm", "Apply", "replicas", "imagePullPolicy"), entry(FieldManager, "Update", "image")}
	w = mustWorkload(t, d)
	cs, _ = w.Containers([]string{"app"})
	p, err = BuildPatch(w, []Change{{Container: cs[0], Image: "example.com/app:dev@sha256:def", PullPolicy: "Always"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	d = applyPatch(t, d, p.Data)
	want = `"owners":{"image":[{"manager":"helm","operation":"Apply","apiVersion":"apps/v1"}],"imagePullPolicy":[{"manager":"helm","operation":"Apply","apiVersion":"apps/v1"}]}`
	if got := d.Annotations[OriginalAnnotation]; !strings.Contains(got, want) {
		t.Fatalf("record after a second refresh and pull-policy = %s, want it to hold %s", got, want)
	}
}

// TestRestoreHandsOwnershipBack: after the restore patch (which, like every update, makes
// livesync the owner of what it changed), restore edits managedFields so that livesync owns
// none of the fields it put back: each goes to the owners recorded before livesync's first
// write, or to nobody for a record kept by a release that recorded none, and a field livesync
// owned before stays its. Without this, Helm 4's next upgrade fails with `conflict with
// "kubectl-livesync"`.
func TestRestoreHandsOwnershipBack(t *testing.T) {
	const (
		dev    = "example.com/app:dev"
		pinned = "example.com/app:dev@sha256:abc"
		helm   = `{"manager":"helm","operation":"Apply","apiVersion":"apps/v1"}`
		self   = `{"manager":"kubectl-livesync","operation":"Update","apiVersion":"apps/v1"}`
	)
	record := func(owners string) string {
		return `{"app":{"image":"` + dev + `","imagePullPolicy":"IfNotPresent","set":{"image":"` + pinned + `","imagePullPolicy":"Always"}` + owners + `}}`
	}
	// after is who owns what once the restore patch went through.
	after := func() []metav1.ManagedFieldsEntry {
		return []metav1.ManagedFieldsEntry{entry("helm", "Apply", "replicas"), entry(FieldManager, "Update", "image", "imagePullPolicy"), entry("kube-controller-manager", "Update", "replicas")}
	}
	for _, tc := range []struct {
		name            string
		owners          string
		after           []metav1.ManagedFieldsEntry
		image, policy   []string
		conflicts       int
		wantNoHandBack  bool
		wantNewHelmTime bool
	}{
		{name: "back to helm", owners: `,"owners":{"image":[` + helm + `],"imagePullPolicy":[` + helm + `]}`, after: after(),
			image: []string{"helm/Apply"}, policy: []string{"helm/Apply"}},
		{name: "a writer in between", owners: `,"owners":{"image":[` + helm + `],"imagePullPolicy":[` + helm + `]}`, after: after(), conflicts: 1,
			image: []string{"helm/Apply"}, policy: []string{"helm/Apply"}},
		{name: "helm's entry gone", owners: `,"owners":{"image":[` + helm + `],"imagePullPolicy":[` + helm + `]}`,
			after: []metav1.ManagedFieldsEntry{entry(FieldManager, "Update", "image", "imagePullPolicy"), entry("kube-controller-manager", "Update", "replicas")},
			image: []string{"helm/Apply"}, policy: []string{"helm/Apply"}, wantNewHelmTime: true},
		{name: "policy owned by nobody before", owners: `,"owners":{"image":[` + helm + `],"imagePullPolicy":[]}`, after: after(),
			image: []string{"helm/Apply"}},
		// Only a write of livesync's own can have left it the owner (a release before this
		// bookkeeping): that is handed back too.
		{name: "livesync recorded as an owner", owners: `,"owners":{"image":[` + helm + `],"imagePullPolicy":[` + helm + `,` + self + `]}`, after: after(),
			image: []string{"helm/Apply"}, policy: []string{"helm/Apply"}},
		{name: "record without owners", owners: "", after: after()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := annotated(record(tc.owners), map[string]State{"app": {pinned, "Always"}})
			w := mustWorkload(t, d)
			server := testDeployment()
			server.ResourceVersion, server.ManagedFields = "43", tc.after
			gv := schema.GroupVersion{Group: "apps", Version: "v1"}
			var jsonPatches []string
			conflicts := tc.conflicts
			client := &restfake.RESTClient{
				GroupVersion:         gv,
				NegotiatedSerializer: scheme.Codecs.WithoutConversion(),
				Client: restfake.CreateHTTPClient(func(req *http.Request) (*http.Response, error) {
					h := http.Header{"Content-Type": []string{runtime.ContentTypeJSON}}
					reply := func(code int, obj runtime.Object) (*http.Response, error) {
						out, err := runtime.Encode(scheme.Codecs.LegacyCodec(gv), obj)
						return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader(string(out)))}, err
					}
					if req.Method == http.MethodGet {
						return reply(http.StatusOK, server)
					}
					b, _ := io.ReadAll(req.Body)
					if req.Header.Get("Content-Type") != string("application/json-patch+json") {
						return reply(http.StatusOK, server) // the restore patch
					}
					jsonPatches = append(jsonPatches, string(b))
					if conflicts > 0 {
						conflicts--
						server.ResourceVersion = "44"
						return &http.Response{StatusCode: http.StatusConflict, Header: h, Body: io.NopCloser(strings.NewReader(
							`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict","message":"the object has been modified","code":409}`))}, nil
					}
					var ops []struct {
						Op, Path string
						Value    json.RawMessage
					}
					if err := json.Unmarshal(b, &ops); err != nil || len(ops) != 2 {
						t.Fatalf("json patch %s: %v", b, err)
					}
					var rv string
					_ = json.Unmarshal(ops[1].Value, &rv)
					if ops[0].Path != "/metadata/managedFields" || ops[1].Path != "/metadata/resourceVersion" || rv != server.ResourceVersion {
						t.Fatalf("json patch %s against resourceVersion %s", b, server.ResourceVersion)
					}
					if err := json.Unmarshal(ops[0].Value, &server.ManagedFields); err != nil {
						t.Fatal(err)
					}
					return reply(http.StatusOK, server)
				}),
			}
			w.Info = &resource.Info{Client: client, Namespace: "ns", Name: "web", Object: w.Object,
				Mapping: &meta.RESTMapping{Resource: gv.WithResource("deployments"), GroupVersionKind: gv.WithKind("Deployment"), Scope: meta.RESTScopeNamespace}}
			plan, err := PlanRestore(w, false)
			if err != nil {
				t.Fatal(err)
			}
			p, err := plan.Patch()
			if err != nil {
				t.Fatal(err)
			}
			if err := Apply(p, false); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if len(jsonPatches) != 1+tc.conflicts {
				t.Fatalf("%d managedFields patches sent, want %d: %q", len(jsonPatches), 1+tc.conflicts, jsonPatches)
			}
			mf := server.ManagedFields
			if got := owned(t, mf, "image"); strings.Join(got, " ") != strings.Join(tc.image, " ") {
				t.Errorf("image owned by %v after restore, want %v", got, tc.image)
			}
			if got := owned(t, mf, "imagePullPolicy"); strings.Join(got, " ") != strings.Join(tc.policy, " ") {
				t.Errorf("imagePullPolicy owned by %v after restore, want %v", got, tc.policy)
			}
			for _, e := range mf {
				if e.Manager == FieldManager {
					t.Errorf("an entry of %s is left: %s", FieldManager, e.FieldsV1.GetRawString())
				}
			}
			for _, e := range mf {
				if e.Manager == "helm" && (e.Time != nil) != tc.wantNewHelmTime {
					t.Errorf("helm's entry time %v, want one only for a new entry", e.Time)
				}
			}
		})
	}
}

// TestOwner: the owner of eight kinds of workload, from their marks and the managers of the
// image, and what refresh and pull-policy do about each: a reconciler (Flux, Argo CD) is
// refused without --force, Helm and hand edits are not.
func TestOwner(t *testing.T) {
	helmMarks := func(d *appsv1.Deployment) {
		d.Labels = map[string]string{"app.kubernetes.io/managed-by": "Helm"}
		d.Annotations = map[string]string{"meta.helm.sh/release-name": "web", "meta.helm.sh/release-namespace": "ns"}
	}
	for _, tc := range []struct {
		name     string
		dress    func(d *appsv1.Deployment)
		managers []metav1.ManagedFieldsEntry
		want     string // Describe, or "" for no owner
		line     string
		refused  string
	}{
		{name: "helm 4", dress: helmMarks, managers: []metav1.ManagedFieldsEntry{entry("helm", "Apply", "image")},
			want: "Helm (helm, release ns/web)",
			line: "deployment/web: Helm (helm, release ns/web) sets this field again at the next helm upgrade; nothing reverts it before, and restore hands it back"},
		{name: "helm 3", dress: helmMarks, managers: []metav1.ManagedFieldsEntry{entry("helm", "Update", "image")},
			want: "Helm (helm, release ns/web)",
			line: "deployment/web: Helm (helm, release ns/web) sets this field again at the next helm upgrade; nothing reverts it before, and restore hands it back"},
		{name: "argo cd tracking annotation", dress: func(d *appsv1.Deployment) {
			helmMarks(d) // a chart Argo CD renders carries Helm's marks too
			d.Annotations["argocd.argoproj.io/tracking-id"] = "shop:apps/Deployment:ns/web"
		}, managers: []metav1.ManagedFieldsEntry{entry("argocd-controller", "Apply", "image")},
			want:    "Argo CD (argocd-controller, Application shop)",
			line:    `deployment/web: Argo CD (argocd-controller, Application shop) reverts this field at its next sync when the Application self-heals; hold it with "argocd app set shop --self-heal=false" (and "argocd app set shop --self-heal" after restore)`,
			refused: `deployment/web: Argo CD (argocd-controller, Application shop) re-applies what it owns: hold it first with "argocd app set shop --self-heal=false", then run again with --force`},
		{name: "argo cd instance label", dress: func(d *appsv1.Deployment) {
			d.Labels = map[string]string{"argocd.argoproj.io/instance": "shop"}
		}, want: "Argo CD (argocd-controller, Application shop)", refused: "re-applies what it owns"},
		{name: "flux kustomization", dress: func(d *appsv1.Deployment) {
			d.Labels = map[string]string{"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}
		}, managers: []metav1.ManagedFieldsEntry{entry("kustomize-controller", "Apply", "image")},
			want:    "Flux (kustomize-controller, Kustomization flux-system/apps)",
			line:    `deployment/web: Flux (kustomize-controller, Kustomization flux-system/apps) re-applies this field: the pin lasts until its next reconcile; hold it with "flux suspend kustomization apps -n flux-system" (and "flux resume kustomization apps -n flux-system" after restore)`,
			refused: "re-applies what it owns"},
		{name: "flux helmrelease", dress: func(d *appsv1.Deployment) {
			helmMarks(d)
			d.Labels["helm.toolkit.fluxcd.io/name"], d.Labels["helm.toolkit.fluxcd.io/namespace"] = "web", "flux-system"
		}, managers: []metav1.ManagedFieldsEntry{entry("helm-controller", "Update", "image")},
			want: "Flux (helm-controller, HelmRelease flux-system/web)", refused: "re-applies what it owns"},
		{name: "unmarked, image managed by kustomize-controller", managers: []metav1.ManagedFieldsEntry{entry("kustomize-controller", "Apply", "image")},
			want: "Flux (kustomize-controller, Kustomization)", refused: "re-applies what it owns"},
		{name: "helm marks, image applied by kustomize-controller", dress: helmMarks, managers: []metav1.ManagedFieldsEntry{entry("kustomize-controller", "Apply", "image")},
			want: "Flux (kustomize-controller, Kustomization)", refused: "re-applies what it owns"},
		{name: "kubectl by hand", managers: []metav1.ManagedFieldsEntry{entry("kubectl-patch", "Update", "image")}},
		{name: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := testDeployment()
			if tc.dress != nil {
				tc.dress(d)
			}
			d.ManagedFields = tc.managers
			w := mustWorkload(t, d)
			cs, _ := w.Containers([]string{"app"})
			got := ""
			if o := w.Owner(cs); o != nil {
				got = o.Describe()
			}
			if got != tc.want {
				t.Fatalf("owner %q, want %q", got, tc.want)
			}
			line, err := w.CheckOwner([]Change{{Container: cs[0], Image: "example.com/app:dev@sha256:abc"}}, false)
			if tc.line != "" && line != tc.line {
				t.Errorf("line\n%s\nwant\n%s", line, tc.line)
			}
			if (line == "") != (tc.want == "") {
				t.Errorf("line %q for owner %q", line, tc.want)
			}
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refused != "" && (err == nil || !errors.Is(err, ErrReconciled) || !strings.Contains(err.Error(), tc.refused)):
				t.Errorf("err %v, want ErrReconciled with %q", err, tc.refused)
			}
			if _, err := w.CheckOwner([]Change{{Container: cs[0], Image: "example.com/app:dev@sha256:abc"}}, true); err != nil {
				t.Errorf("refused with force: %v", err)
			}
		})
	}
}
