//go:build bench

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// cluster is the benchmark's view of the cluster: its own namespace, the tools under test and
// an in-process pods/exec executor (the one the binary uses).
type cluster struct {
	kubeconfig string
	kubectl    string
	lcimage    string
	registry   string
	binary     string
	ns         string
	image      string
	imageGNU   string // see gnuImage
	client     kubernetes.Interface
	exec       *workload.PodExecutor
}

func newCluster(kubeconfig, kubectl, lcimage, registry, binary string) (*cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig %q: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &cluster{
		kubeconfig: kubeconfig, kubectl: kubectl, lcimage: lcimage, registry: registry, binary: binary,
		client: client, exec: &workload.PodExecutor{Config: cfg, Client: client},
	}, nil
}

// gnuImage pushes the app-gnu image (dash, GNU tools and inotifywait) once and returns it.
func (c *cluster) gnuImage(ctx context.Context) (string, error) {
	if c.imageGNU != "" {
		return c.imageGNU, nil
	}
	out, err := exec.CommandContext(ctx, c.lcimage, "build", "--registry", c.registry, "--kind", "app-gnu", "livesync-bench:app-gnu").Output()
	if err != nil {
		return "", fmt.Errorf("building the app-gnu image: %w", exitDetail(err))
	}
	c.imageGNU = c.registry + "/livesync-bench:app-gnu@" + strings.TrimSpace(string(out))
	return c.imageGNU, nil
}

// setUp creates the namespace and pushes the app image.
func (c *cluster) setUp(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, c.lcimage, "build", "--registry", c.registry, "--kind", "app", "livesync-bench:app").Output()
	if err != nil {
		return fmt.Errorf("building the app image: %w", exitDetail(err))
	}
	c.image = c.registry + "/livesync-bench:app@" + strings.TrimSpace(string(out))
	c.ns = fmt.Sprintf("bench-%04d", rand.IntN(10000))
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %q: %w", c.ns, err)
	}
	// Pods are rejected until the namespace's default ServiceAccount exists.
	return poll(ctx, time.Minute, func() (bool, error) {
		_, err := c.client.CoreV1().ServiceAccounts(c.ns).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

func (c *cluster) tearDown() {
	if c.ns == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = c.client.CoreV1().Namespaces().Delete(ctx, c.ns, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
}

// deploy creates a Deployment of the app image; emptyDir, if set, mounts one there, on a tmpfs
// with memory.
func (c *cluster) deploy(ctx context.Context, name string, replicas int32, emptyDir string, memory, gnu bool) error {
	labels := map[string]string{"app": name}
	img := c.image
	if gnu {
		var err error
		if img, err = c.gnuImage(ctx); err != nil {
			return err
		}
	}
	spec := corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		Containers:                    []corev1.Container{{Name: "app", Image: img, ImagePullPolicy: corev1.PullIfNotPresent}},
	}
	if emptyDir != "" {
		vol := &corev1.EmptyDirVolumeSource{}
		if memory {
			vol.Medium = corev1.StorageMediumMemory
		}
		spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: vol}}}
		spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: emptyDir}}
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	if _, err := c.client.AppsV1().Deployments(c.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating deployment %q: %w", name, err)
	}
	return nil
}

// targets waits until the deployment's replicas all run and returns their containers.
func (c *cluster) targets(ctx context.Context, name string, replicas int) ([]filesync.Target, error) {
	var out []filesync.Target
	err := poll(ctx, 3*time.Minute, func() (bool, error) {
		list, err := c.client.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		out = out[:0]
		for i := range list.Items {
			if t, ok := workload.TargetOf(&list.Items[i], "app"); ok {
				out = append(out, t)
			}
		}
		return len(out) == replicas && len(list.Items) == replicas, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for %d running pods of %q: %w", replicas, name, err)
	}
	return out, nil
}

// sh runs a script in t and returns its stdout.
func (c *cluster) sh(ctx context.Context, t filesync.Target, script string, stdin io.Reader) (string, error) {
	var out, errb bytes.Buffer
	if err := c.exec.Exec(ctx, t, []string{"sh", "-c", script}, stdin, &out, &errb); err != nil {
		return out.String(), fmt.Errorf("running %q in %s: %w: %s", firstLine(script), t, err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// floor runs `true` in t and returns how long the exec took.
func (c *cluster) floor(ctx context.Context, t filesync.Target) (time.Duration, error) {
	start := time.Now()
	err := c.exec.Exec(ctx, t, []string{"true"}, nil, io.Discard, io.Discard)
	return time.Since(start), err
}

// tarExec extracts files (rel → content) with one `tar -x` exec into dir of t, the least any
// tool can do to move those bytes: the transfer baseline of bursts and big files. It is timed
// like the tool, from the start to the moment p sees the last file in the container.
func (c *cluster) tarExec(ctx context.Context, t filesync.Target, p *probe, dir string, rels []string, files map[string][]byte) (time.Duration, error) {
	exp := make([]expect, len(rels))
	for i, r := range rels {
		exp[i] = expect{path: path.Join(dir, r), data: files[r]}
	}
	if err := p.arm(exp); err != nil {
		return 0, err
	}
	tarball := tarOf(rels, files)
	start := time.Now()
	if err := c.exec.Exec(ctx, t, []string{"tar", "-x", "-o", "-f", "-", "-C", dir}, bytes.NewReader(tarball), io.Discard, io.Discard); err != nil {
		return 0, err
	}
	at, err := p.arrival(time.Minute)
	return at.Sub(start), err
}

// buildProbe compiles the in-container probe as a static binary.
func buildProbe(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "lsprobe")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "bench", "-trimpath", "-ldflags", "-s -w", "-o", out, "./test/bench/probe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the probe: %w: %s", err, b)
	}
	return out, nil
}

// uploadProbe copies the probe to /tmp/lsprobe in t and checks it arrived whole.
func (c *cluster) uploadProbe(ctx context.Context, t filesync.Target, bin string) error {
	b, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	out, err := c.sh(ctx, t, "cat > /tmp/lsprobe.part && chmod 755 /tmp/lsprobe.part && mv /tmp/lsprobe.part /tmp/lsprobe && sha256sum /tmp/lsprobe", bytes.NewReader(b))
	if err != nil {
		return err
	}
	if !strings.HasPrefix(out, hex.EncodeToString(sum[:])) {
		return fmt.Errorf("uploading the probe to %s: checksum mismatch", t)
	}
	return nil
}

func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond() })
}

func exitDetail(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}
