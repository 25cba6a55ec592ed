//go:build bench

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/livesync-dev/kubectl-livesync/test/internal/sessiontest"
)

// measureBigSave is issue 34's table: this project's own binary (about 35 MB), rebuilt with
// another -X string, saved into a running container as a build tool saves it (written over in
// place; written to .server.tmp and renamed over server), and rebuilt with a line of code more
// (written in place); each save follows an untimed one of the same base build, so that it
// changes exactly that. Against `tar | gzip -1 | kubectl exec
// -i … 'gzip -dc | tar -x'` of the same file, through the remote-profile proxy and over
// loopback, every round running each once in a rotating order. Each is timed from the start of
// the save to the moment the session reported the batch that brought server (livesync) or the
// pipe exited, and the container's copy is checked by its sha256 after each.
func (b *bench) measureBigSave(ctx context.Context) error {
	rounds := max(b.reps, 3)
	dir := filepath.Join(b.tmp, "bigsave-bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// v0, then v1–v3 with another -X string, and c1–c3: v0 with a one-line code change (an
	// overlay of pkg/filesync/batchgzip.go with one more statement in compressBatch: the code
	// after it shifts).
	src, err := os.ReadFile("pkg/filesync/batchgzip.go")
	if err != nil {
		return err
	}
	const anchor = "\tsent := p.sent()\n"
	if !strings.Contains(string(src), anchor) {
		return fmt.Errorf("pkg/filesync/batchgzip.go: no %q to add a line after", anchor)
	}
	build := func(name, version string, line int) ([]byte, error) {
		out := filepath.Join(dir, name)
		args := []string{"build", "-trimpath", "-ldflags", "-s -w -X github.com/livesync-dev/kubectl-livesync/pkg/version.Version=" + version}
		if line > 0 {
			code := strings.Replace(string(src), anchor, anchor+fmt.Sprintf("\tif len(sent) == %d {\n\t\treturn false\n\t}\n", 1000+line), 1)
			abs, err := filepath.Abs("pkg/filesync/batchgzip.go")
			if err != nil {
				return nil, err
			}
			repl := filepath.Join(dir, name+".go")
			if err := os.WriteFile(repl, []byte(code), 0o644); err != nil {
				return nil, err
			}
			ov := filepath.Join(dir, name+".json")
			if err := os.WriteFile(ov, []byte(fmt.Sprintf(`{"Replace":{%q:%q}}`, abs, repl)), 0o644); err != nil {
				return nil, err
			}
			args = append(args, "-overlay", ov)
		}
		cmd := exec.CommandContext(ctx, "go", append(args, "-o", out, "./cmd/kubectl-livesync")...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if o, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building %s: %w: %s", name, err, lastLines(string(o), 5))
		}
		return os.ReadFile(out)
	}
	base, err := build("v0", "bench-v000", 0)
	if err != nil {
		return err
	}
	var versions, codes [][]byte
	for i := 1; i <= 3; i++ {
		v, err := build(fmt.Sprintf("v%d", i), fmt.Sprintf("bench-v%03d", i), 0)
		if err != nil {
			return err
		}
		c, err := build(fmt.Sprintf("c%d", i), "bench-v000", i)
		if err != nil {
			return err
		}
		versions, codes = append(versions, v), append(codes, c)
	}
	b.logf("binary: %.1f MiB; a rebuild with another -X string differs in %d bytes, one with a line of code more in %d", mib(int64(len(base))), differ(base, versions[0]), differ(base, codes[0]))
	rc, closeProxy, err := b.remoteCluster()
	if err != nil {
		return err
	}
	defer closeProxy()
	ts, err := b.c.targets(ctx, "bs", 1)
	if err != nil {
		return err
	}
	t := ts[0]
	type side struct {
		name  string
		c     *cluster
		local string
		s     *sessiontest.Session
		cur   []byte // what server holds
	}
	var sides []*side
	for _, p := range []struct {
		name string
		c    *cluster
	}{{"remote", rc}, {"loopback", b.c}} {
		sd := &side{name: p.name, c: p.c, local: filepath.Join(b.tmp, "bigsave-"+p.name), cur: base}
		if err := os.MkdirAll(sd.local, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(sd.local, "server"), base, 0o755); err != nil {
			return err
		}
		saved := b.c
		b.c = p.c
		sd.s = b.newSession().Args("deploy/bs").Map(sd.local, "/bs/"+p.name).Start()
		b.c = saved
		defer sd.s.Stop()
		if _, err := sd.s.Next("initial-sync", 5*time.Minute); err != nil {
			return err
		}
		sides = append(sides, sd)
	}
	check := func(remote string, want []byte) error {
		sum := sha256.Sum256(want)
		out, err := b.c.sh(ctx, t, "sha256sum "+remote, nil)
		if err != nil {
			return err
		}
		if got := strings.Fields(out); len(got) == 0 || got[0] != hex.EncodeToString(sum[:]) {
			return fmt.Errorf("%s holds %q after the save, want sha256 %x", remote, out, sum)
		}
		return nil
	}
	// put writes data into sd's local tree (in place, or to .server.tmp then renamed) and waits
	// for the batch that brought server.
	put := func(sd *side, data []byte, rename bool) (time.Duration, error) {
		name := filepath.Join(sd.local, "server")
		start := time.Now()
		if rename {
			tmp := filepath.Join(sd.local, ".server.tmp")
			if err := os.WriteFile(tmp, data, 0o755); err != nil {
				return 0, err
			}
			if err := os.Rename(tmp, name); err != nil {
				return 0, err
			}
		} else if err := os.WriteFile(name, data, 0o755); err != nil {
			return 0, err
		}
		remote := "/bs/" + sd.name + "/server"
		var sent int64
		for {
			ev, err := sd.s.Next("batch", 2*time.Minute)
			if err != nil {
				return 0, err
			}
			if ev.Failed != 0 {
				return 0, fmt.Errorf("%s: a batch failed", sd.name)
			}
			sent += ev.Bytes
			if slices.Contains(ev.Names, remote) {
				break
			}
		}
		d := time.Since(start)
		b.logf("bigsave %s: %s in %v, %d bytes sent", sd.name, map[bool]string{true: "temp + rename", false: "in place"}[rename], d.Round(time.Millisecond), sent)
		sd.cur = data
		time.Sleep(100 * time.Millisecond) // a batch that follows (there should be none) is drained
		sd.s.Drain()
		return d, check(remote, data)
	}
	// save puts v0 back (untimed), then data: the save is exactly data's change from v0.
	save := func(sd *side, data []byte, rename bool) (time.Duration, error) {
		if !bytes.Equal(sd.cur, base) {
			if _, err := put(sd, base, false); err != nil {
				return 0, err
			}
		}
		time.Sleep(2 * time.Second) // the signature of what was sent is taken off the batch's path
		return put(sd, data, rename)
	}
	pipe := func(sd *side) (time.Duration, error) {
		dest := "/bs/pipe-" + sd.name
		remote := []string{sd.c.kubectl, "--kubeconfig", sd.c.kubeconfig, "-n", sd.c.ns, "exec", "-i", t.Pod, "-c", "app", "--",
			"sh", "-c", shellQuote("mkdir -p " + dest + " && gzip -dc | tar -x -f - -C " + dest)}
		start := time.Now()
		if err := run(ctx, "bash", "-o", "pipefail", "-c", "tar -c -C "+shellQuote(sd.local)+" server | gzip -1 | "+strings.Join(remote, " ")); err != nil {
			return 0, err
		}
		d := time.Since(start)
		data, err := os.ReadFile(filepath.Join(sd.local, "server"))
		if err != nil {
			return 0, err
		}
		return d, check(dest+"/server", data)
	}
	times := map[string][]time.Duration{}
	for r := range rounds {
		for _, sd := range sides {
			steps := []struct {
				name string
				fn   func() (time.Duration, error)
			}{
				{"in place", func() (time.Duration, error) { return save(sd, versions[r%len(versions)], false) }},
				{"temp + rename", func() (time.Duration, error) { return save(sd, versions[r%len(versions)], true) }},
				{"code", func() (time.Duration, error) { return save(sd, codes[r%len(codes)], false) }},
				{"pipe", func() (time.Duration, error) { return pipe(sd) }},
			}
			for k := range steps {
				st := steps[(k+r)%len(steps)]
				d, err := st.fn()
				if err != nil {
					return fmt.Errorf("%s %s: %w", sd.name, st.name, err)
				}
				times[sd.name+" "+st.name] = append(times[sd.name+" "+st.name], d)
			}
		}
	}
	for _, sd := range sides {
		prof := "loopback"
		if sd.name == "remote" {
			prof = fmt.Sprintf("remote profile (%.0f Mbit/s, %s RTT)", remoteRate*8/1e6, remoteRTT)
		}
		pp := times[sd.name+" pipe"]
		b.logf("bigsave %s pipe s: %v", sd.name, pp)
		for _, row := range []struct{ name, what, target string }{
			{"in place", "another -X string, written over in place", "≤ 0.25×"},
			{"temp + rename", "another -X string, written to .server.tmp, renamed over server", "≤ 0.25×"},
			{"code", "a line of code more, written over in place", "≤ 0.6×"},
		} {
			ls := times[sd.name+" "+row.name]
			b.logf("bigsave %s %s s: %v", sd.name, row.name, ls)
			rt := pairRatio(ls, pp)
			res := b.res.pair(fmt.Sprintf("%.0f MB binary rebuilt with %s, save→visible, %s (n=%d; ratio: median of per-pair ratios)", float64(len(base))/1e6, row.what, prof, rounds),
				secs(median(ls)), "s", "`tar | gzip -1 | kubectl exec -i … 'gzip -dc | tar -x'` of the same file", secs(median(pp)))
			res.Ratio = ref(rt)
			if sd.name == "remote" {
				want, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(row.target, "≤ "), "×"), 64)
				res.target(row.target, rt <= want)
			}
		}
	}
	return nil
}

// differ counts the bytes that differ between a and b (and the length difference).
func differ(a, b []byte) int {
	n := max(len(a), len(b)) - min(len(a), len(b))
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}
