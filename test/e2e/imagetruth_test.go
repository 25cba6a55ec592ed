//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// truthReport is the part of `inspect -o json` these tests read, additions included.
type truthReport struct {
	PullSecrets   []string     `json:"pullSecrets"`
	ServerVersion string       `json:"serverVersion"`
	Containers    []truthImage `json:"containers"`
	ImageVolumes  []truthImage `json:"imageVolumes"`
}

type truthImage struct {
	Name           string   `json:"name"`
	Image          string   `json:"image"`
	PullPolicy     string   `json:"pullPolicy"`
	RegistryDigest string   `json:"registryDigest"`
	Verdict        string   `json:"verdict"`
	Notes          []string `json:"notes"`
	Pods           []struct {
		Name, Digest, ImageID, Match, Pull string
	} `json:"pods"`
	Original *struct {
		Image string `json:"image"`
	} `json:"original"`
}

func inspectTruth(t *testing.T, args ...string) truthReport {
	t.Helper()
	r := mustLivesync(t, append([]string{"inspect", "-o", "json"}, args...)...)
	var rep truthReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("inspect -o json printed invalid JSON: %v\n%s", err, r)
	}
	return rep
}

// localClusterDir returns the local cluster's dir: these tests reach into its node (a registry
// on this machine's loopback, images loaded with ctr), which only the local cluster allows.
func localClusterDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LIVESYNC_E2E_LOCALCLUSTER")
	if dir == "" {
		t.Skip("LIVESYNC_E2E_LOCALCLUSTER is not set: this test needs hack/localcluster's node (hack/e2e.sh sets it)")
	}
	return dir
}

// authRegistry puts the suite's registry behind HTTP basic auth on another loopback port, one
// password per user, and returns its host:port. The node reaches it like the plain registry
// (containerd pulls from loopback registries over plain HTTP).
func authRegistry(t *testing.T, users map[string]string) string {
	t.Helper()
	backend, err := url.Parse("http://" + e.registry)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(backend)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || users[u] == "" || users[u] != p {
			w.Header().Set("WWW-Authenticate", `Basic realm="livesync-e2e"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
		r.Header.Del("Authorization")
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// pullSecret creates a kubernetes.io/dockerconfigjson secret for user on registry.
func pullSecret(t *testing.T, ns, name, registry, user, pass string) {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	cfg, err := json.Marshal(map[string]any{"auths": map[string]any{registry: map[string]string{"username": user, "password": pass, "auth": auth}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.client.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: cfg},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// readyDeployment creates a one-replica Deployment of img, IfNotPresent, its spec changed by
// mutate, and waits until it is available.
func readyDeployment(t *testing.T, ns, name, img string, mutate func(*corev1.PodSpec)) {
	t.Helper()
	createDeployment(t, ns, name, img, 1, mutate)
	waitDeploymentReady(t, ns, name)
}

func hasNote(c truthImage, s string) bool {
	for _, n := range c.Notes {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// TestEnsureSecretPulledImages is KEP-2535 on the local node: two Deployments of the same
// IfNotPresent :dev, pulling with secrets of two users of one registry. After the tag moves, the
// second one's credentials have never pulled the image on the node, so the kubelet pulls the
// tag again and it starts on the new digest while the first stays on the old. inspect says so
// per workload, with the note that is true for workloads with pull secrets on >= 1.35, and the
// old note for a workload without.
func TestEnsureSecretPulledImages(t *testing.T) {
	localClusterDir(t)
	ns := namespace(t)
	repo := "kep2535-" + ns
	reg := authRegistry(t, map[string]string{"alice": "alice-pw", "bob": "bob-pw"})
	d1 := pushImage(t, repo, "dev", "app")
	img := reg + "/" + repo + ":dev"
	pullSecret(t, ns, "alice", reg, "alice", "alice-pw")
	pullSecret(t, ns, "bob", reg, "bob", "bob-pw")
	withSecret := func(secret string) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) { s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: secret}} }
	}
	readyDeployment(t, ns, "first", img, withSecret("alice"))
	d2 := pushImage(t, repo, "dev", "app")
	readyDeployment(t, ns, "second", img, withSecret("bob"))
	// Without secrets, from the plain registry.
	readyDeployment(t, ns, "plain", image(repo, "dev"), nil)

	for _, tc := range []struct {
		name, digest, verdict, pull string
	}{{"first", d1, "stale", "pulled"}, {"second", d2, "current", "pulled"}} {
		rep := inspectTruth(t, "-n", ns, "deploy/"+tc.name)
		c := rep.Containers[0]
		if len(c.Pods) != 1 || c.Pods[0].Digest != tc.digest || c.Verdict != tc.verdict || c.RegistryDigest != d2 {
			t.Errorf("%s: verdict %s, pods %+v; want %s running %s (registry %s)", tc.name, c.Verdict, c.Pods, tc.verdict, tc.digest, d2)
		}
		if len(c.Pods) == 1 && (c.Pods[0].Pull != tc.pull || c.Pods[0].Match == "") {
			t.Errorf("%s: pull %q match %q, want %q and a match", tc.name, c.Pods[0].Pull, c.Pods[0].Match, tc.pull)
		}
		if !hasNote(c, "pulls the tag again (KEP-2535)") || hasNote(c, "never pulls the moved tag") {
			t.Errorf("%s: notes %q, want the KEP-2535 note only", tc.name, c.Notes)
		}
		if len(rep.PullSecrets) != 1 || !strings.HasPrefix(rep.ServerVersion, "v1.") {
			t.Errorf("%s: pullSecrets %v serverVersion %q", tc.name, rep.PullSecrets, rep.ServerVersion)
		}
	}
	plain := inspectTruth(t, "-n", ns, "deploy/plain").Containers[0]
	if !hasNote(plain, "a node that already has the image never pulls the moved tag") || hasNote(plain, "KEP-2535") {
		t.Errorf("plain: notes %q, want the note for workloads without pull secrets", plain.Notes)
	}

	// refresh pins the first to what the tag serves now, resolving it with alice's credentials.
	mustLivesync(t, "-n", ns, "refresh", "deploy/first", "--timeout", "2m")
	if c := inspectTruth(t, "-n", ns, "deploy/first").Containers[0]; c.Verdict != "pinned" {
		t.Errorf("first after refresh: %+v", c)
	}
}

// TestImageVolumeRefresh: an image volume on a mutable tag is inspected beside the container,
// refresh pins its moved tag in one rollout and the new pod mounts the new content,
// pull-policy --volume sets its policy alone, and restore brings the tag and policy back.
func TestImageVolumeRefresh(t *testing.T) {
	localClusterDir(t)
	ns := namespace(t)
	appRepo, dataRepo := "ivapp-"+ns, "ivdata-"+ns
	pushImage(t, appRepo, "dev", "app")
	mark := func() string { return fmt.Sprintf("%s-%d", ns, rand.Int64()) }
	m1 := mark()
	push := func(marker string) string {
		r := run(t, e.lcimage, "build", "--registry", e.registry, "--kind", "app", "--marker", marker, dataRepo+":dev")
		if r.code != 0 {
			t.Fatalf("pushing %s: %s", dataRepo, r)
		}
		return strings.TrimSpace(r.stdout)
	}
	v1 := push(m1)
	vol := image(dataRepo, "dev")
	readyDeployment(t, ns, "web", image(appRepo, "dev"), func(s *corev1.PodSpec) {
		s.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: vol, PullPolicy: corev1.PullIfNotPresent}}}}
		s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	})
	if got := readMarker(t, ns, "web"); !strings.Contains(got, m1) {
		t.Fatalf("the volume holds %q, want %q", got, m1)
	}

	rep := inspectTruth(t, "-n", ns, "deploy/web")
	if len(rep.ImageVolumes) != 1 {
		t.Fatalf("inspect lists %d image volumes, want 1: %+v", len(rep.ImageVolumes), rep)
	}
	v := rep.ImageVolumes[0]
	if v.Name != "data" || v.Image != vol || v.PullPolicy != "IfNotPresent" || v.RegistryDigest != v1 || len(v.Pods) != 1 {
		t.Fatalf("image volume before the push: %+v", v)
	}
	// The running digest is status.containerStatuses[].volumeMounts[].volumeStatus.image, behind
	// ImageVolumeWithDigest (on here). The 1.37.2 kubelet never fills it in (its container status
	// mounts carry no volume name: kubelet logs "image was not found"), so inspect must say it
	// does not know, and refresh must pin to make it known. A kubelet that reports it must be
	// compared like a container.
	reported := v.Pods[0].Digest != ""
	switch {
	case reported && (v.Pods[0].Digest != v1 || v.Verdict != "current"):
		t.Fatalf("image volume with its digest reported: %+v", v)
	case !reported && (v.Verdict != "unknown" || !hasNote(v, "no pod reports the digest this image volume mounts")):
		t.Fatalf("image volume without its digest reported: %+v", v)
	}

	m2 := mark()
	v2 := push(m2)
	if v := inspectTruth(t, "-n", ns, "deploy/web").ImageVolumes[0]; v.RegistryDigest != v2 || (reported && v.Verdict != "stale") || (!reported && v.Verdict != "unknown") {
		t.Fatalf("image volume after the push (digest reported: %v): %+v", reported, v)
	}
	gen := getDeployment(t, ns, "web").Generation
	r := mustLivesync(t, "-n", ns, "refresh", "deploy/web", "--timeout", "2m")
	if !strings.Contains(r.stdout, `image volume "data"`) || !strings.Contains(r.stdout, `container "app": current`) {
		t.Errorf("refresh output:\n%s", r)
	}
	dep := getDeployment(t, ns, "web")
	if got := dep.Spec.Template.Spec.Volumes[0].Image.Reference; got != vol+"@"+v2 {
		t.Fatalf("volume reference after refresh = %q, want %q", got, vol+"@"+v2)
	}
	if dep.Generation != gen+1 || dep.Spec.Template.Spec.Containers[0].Image != image(appRepo, "dev") {
		t.Errorf("refresh: generation %d -> %d (want one rollout), container image %q", gen, dep.Generation, dep.Spec.Template.Spec.Containers[0].Image)
	}
	settle(t, ns, "web")
	if got := readMarker(t, ns, "web"); !strings.Contains(got, m2) {
		t.Errorf("after refresh the new pod's volume holds %q, want %q", got, m2)
	}
	if v := inspectTruth(t, "-n", ns, "deploy/web").ImageVolumes[0]; v.Verdict != "pinned" || v.Original == nil || v.Original.Image != vol {
		t.Errorf("image volume after refresh: %+v", v)
	}

	mustLivesync(t, "-n", ns, "pull-policy", "deploy/web", "Always", "--volume", "data", "--timeout", "2m")
	dep = getDeployment(t, ns, "web")
	if p := dep.Spec.Template.Spec.Volumes[0].Image.PullPolicy; p != corev1.PullAlways || dep.Spec.Template.Spec.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("pull-policy --volume: volume %s, container %s", p, dep.Spec.Template.Spec.Containers[0].ImagePullPolicy)
	}

	mustLivesync(t, "-n", ns, "restore", "deploy/web", "--timeout", "2m")
	dep = getDeployment(t, ns, "web")
	if s := dep.Spec.Template.Spec.Volumes[0].Image; s.Reference != vol || s.PullPolicy != corev1.PullIfNotPresent {
		t.Errorf("after restore the volume is %+v, want %s IfNotPresent", s, vol)
	}
	if _, ok := dep.Annotations[originalAnnotation]; ok {
		t.Errorf("restore left the annotation")
	}
}

// readMarker reads /data/etc/livesync-build (lcimage's marker) in the running pod of name.
func readMarker(t *testing.T, ns, name string) string {
	t.Helper()
	pods := runningPods(t, ns, "app="+name)
	if len(pods) != 1 {
		t.Fatalf("%d running pods of %s, want 1", len(pods), name)
	}
	r := run(t, e.kubectl, "--kubeconfig", e.kubeconfig, "-n", ns, "exec", pods[0].Name, "-c", "app", "--", "cat", "/data/etc/livesync-build")
	if r.code != 0 {
		t.Fatalf("reading the volume's marker: %s", r)
	}
	return r.stdout
}

// firstNode returns the name of the local cluster's node 1, whose containerd ctr reaches, from
// the nodes file up.sh writes ("N NAME IP" a line); "" for a cluster without it (an older up.sh's,
// of one node).
func firstNode(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "nodes"))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatalf("reading the local cluster's nodes: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "1" {
			return f[1]
		}
	}
	t.Fatalf("no node 1 in %s", filepath.Join(dir, "nodes"))
	return ""
}

// ctr runs the local cluster's ctr in containerd's k8s.io namespace (node 1's images).
func ctr(t *testing.T, dir string, args ...string) {
	t.Helper()
	r := run(t, filepath.Join(dir, "containerd-bin", "ctr"), append([]string{"--address", filepath.Join(dir, "containerd.sock"), "--namespace", "k8s.io"}, args...)...)
	if r.code != 0 {
		t.Fatalf("ctr %s: %s", strings.Join(args, " "), r)
	}
}

// TestLoadedImageUnknown: an image loaded into the node (ctr import, no registry digest) runs
// with a bare config digest as its imageID. When it is what the tag serves, the config digest
// matches; when the tag serves something else, the verdict is unknown, never stale, with one
// line that says why.
func TestLoadedImageUnknown(t *testing.T) {
	dir := localClusterDir(t)
	ns := namespace(t)
	tmp := t.TempDir()
	load := func(repo string) {
		src := image(repo, "dev")
		tar := filepath.Join(tmp, repo+".tar")
		ctr(t, dir, "images", "pull", "--plain-http", src)
		// The pull skips a layer whose snapshot the node has unpacked already; export wants
		// every blob, and a layer's blob may be gone since (it was: "content digest ...: not found").
		ctr(t, dir, "content", "fetch", "--plain-http", src)
		// --local: ctr's export through the transfer service copies the daemon's stream into
		// the file on a goroutine that ctr does not wait for, so the file could end short
		// (the import then failed: "short read: expected 1149658 bytes but got 1111040").
		ctr(t, dir, "images", "export", "--local", tar, src)
		ctr(t, dir, "images", "rm", "--sync", src)
		ctr(t, dir, "images", "import", tar)
	}
	same, moved := "loaded-"+ns, "loadedmv-"+ns
	pushImage(t, same, "dev", "app")
	load(same)
	pushImage(t, moved, "dev", "app")
	load(moved)
	now := pushImage(t, moved, "dev", "app")
	// On node 1, where the images were loaded.
	onFirst := func(s *corev1.PodSpec) {
		if n := firstNode(t, dir); n != "" {
			s.NodeSelector = map[string]string{corev1.LabelHostname: n}
		}
	}
	for _, repo := range []string{same, moved} {
		readyDeployment(t, ns, repo, image(repo, "dev"), onFirst)
	}

	c := inspectTruth(t, "-n", ns, "deploy/"+same).Containers[0]
	if len(c.Pods) != 1 || strings.Contains(c.Pods[0].ImageID, "@") || c.Pods[0].Match != "config" || c.Verdict != "current" || c.Pods[0].Pull != "already present" {
		t.Errorf("loaded image the tag serves: verdict %s pods %+v, want a bare imageID matching the config, current, already present", c.Verdict, c.Pods)
	}
	c = inspectTruth(t, "-n", ns, "deploy/"+moved).Containers[0]
	if len(c.Pods) != 1 || c.Pods[0].Match != "none" || c.Verdict != "unknown" || c.RegistryDigest != now {
		t.Errorf("loaded image the tag moved from: verdict %s pods %+v, want unknown with match none", c.Verdict, c.Pods)
	}
	if !hasNote(c, "an imageID that names no repository") || strings.Contains(strings.Join(c.Notes, ""), "\n") {
		t.Errorf("notes %q, want one line saying why", c.Notes)
	}
	r := mustLivesync(t, "-n", ns, "inspect", "deploy/"+moved)
	if !strings.Contains(r.stdout, "(unknown)") || !strings.Contains(r.stdout, "an image loaded into the node") {
		t.Errorf("table:\n%s", r)
	}
}

// TestRestoreDeletedPin: restore of an original that was itself pinned to a digest the registry
// has since deleted is refused in one line and changes nothing (a pod pinned to it may not
// start); --force restores it anyway. refresh checks its new pin the same way.
func TestRestoreDeletedPin(t *testing.T) {
	ns := namespace(t)
	repo := "gonepin-" + ns
	d1 := pushImage(t, repo, "dev", "app")
	orig := image(repo, "dev") + "@" + d1
	readyDeployment(t, ns, "web", orig, nil)
	pushImage(t, repo, "dev", "app")
	mustLivesync(t, "-n", ns, "refresh", "deploy/web", "--timeout", "2m")
	settle(t, ns, "web")

	req, err := http.NewRequest(http.MethodDelete, "http://"+e.registry+"/v2/"+repo+"/manifests/"+d1, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("deleting %s from the registry: %s", d1, resp.Status)
	}

	rv := getDeployment(t, ns, "web").ResourceVersion
	for _, args := range [][]string{{"restore", "deploy/web"}, {"restore", "deploy/web", "--dry-run"}} {
		assertOneLineError(t, livesync(t, append([]string{"-n", ns}, args...)...), "the registry no longer serves this digest")
	}
	if got := getDeployment(t, ns, "web").ResourceVersion; got != rv {
		t.Fatalf("a refused restore changed the deployment: resourceVersion %s -> %s", rv, got)
	}
	mustLivesync(t, "-n", ns, "restore", "deploy/web", "--force", "--no-wait")
	if got := getDeployment(t, ns, "web").Spec.Template.Spec.Containers[0].Image; got != orig {
		t.Errorf("restore --force: image %q, want %q", got, orig)
	}
}
