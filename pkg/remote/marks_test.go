package remote

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runMarks runs driver after a stream's scan functions (StreamScanFuncs) in
// one shell of ex, as the stream's loop runs them ($0 livesync-stream), and
// returns what it printed.
func runMarks(t *testing.T, ex *localExecutor, driver string, args ...string) string {
	t.Helper()
	return runShell(t, ex, append([]string{"sh", "-c", StreamScanFuncs() + driver, "livesync-stream"}, args...))
}

// runShell runs argv with ex and returns what it printed.
func runShell(t *testing.T, ex *localExecutor, argv []string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if err := ex.Exec(context.Background(), testTarget, argv, nil, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	return out.String()
}

// shadowed makes date, touch, mktemp, readlink and rm functions that append
// their name and arguments to the file $log before they run the command:
// a call shows even where a busybox shell runs the applet with no exec, or
// no fork.
const shadowed = `
for c in date touch mktemp readlink rm; do eval "$c() { echo $c \"\$*\" >>\"\$log\"; command $c \"\$@\"; }"; done
`

// scanFile parses the scan output a driver left in file name.
func scanFile(t *testing.T, name string) *ScanResult {
	t.Helper()
	b, err := os.ReadFile(name)
	must(t, err)
	r, err := ParseScan(b)
	if err != nil {
		t.Fatalf("%s: %v: %q", name, err, b)
	}
	return r
}

// atoi parses a number a driver printed.
func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	must(t, err)
	return n
}

// livesync_now's bounds hold `date +%s` between them, read before and
// after it, and are at most four seconds apart; a stamped ring file's
// mtime is no later than its bound, nor six seconds earlier. The readings
// are spread over a few seconds, and the base is read again before every
// third, so that the fractions of a second that the whole seconds cut off
// fall everywhere. Without /proc/uptime, livesync_now reads date.
func TestLivesyncNowBounds(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			driver := `TMPDIR=$1
i=0
while [ $i -lt 30 ]; do
  [ $((i % 3)) != 2 ] || livesync_b=$((livesync_b - 60))
  a=$(date +%s); livesync_mark; b=$(date +%s)
  echo "now $a $livesync_t $livesync_h $b"
  for k in 0 1 2 3 4 5 6 7; do
    eval "h=\${livesync_mh$k-}"
    [ -z "$h" ] || echo "slot $k $h $(stat -c %Y "$livesync_dir/$k")"
  done
  sleep 0.1
  i=$((i + 1))
done
livesync_up() { livesync_u=''; return 1; }
a=$(date +%s); livesync_mark; b=$(date +%s); echo "date $a $livesync_t $livesync_h $b"
`
			nows := 0
			for l := range strings.Lines(runMarks(t, ex, driver, t.TempDir())) {
				f := strings.Fields(l)
				switch {
				case len(f) == 5 && (f[0] == "now" || f[0] == "date"):
					nows++
					before, lo, hi, after := atoi(t, f[1]), atoi(t, f[2]), atoi(t, f[3]), atoi(t, f[4])
					if lo > after || hi < before || hi-lo > 4 {
						t.Errorf("%q: bounds %d..%d, date %d then %d", l, lo, hi, before, after)
					}
					if f[0] == "date" && (lo != hi || lo < before || lo > after) {
						t.Errorf("without /proc/uptime: bounds %d..%d, want date's reading, between %d and %d", lo, hi, before, after)
					}
				case len(f) == 4 && f[0] == "slot":
					if h, mtime := atoi(t, f[2]), atoi(t, f[3]); mtime > h || mtime < h-6 {
						t.Errorf("ring file %s has mtime %d, bound %d", f[1], mtime, h)
					}
				default:
					t.Fatalf("unexpected line %q", l)
				}
			}
			if nows != 31 {
				t.Errorf("%d readings, want 31", nows)
			}
		})
	}
}

// Scans as the loop runs them, a second apart, of two mappings each time:
// a file written right after a scan (in its second) is listed by the next;
// the marker a scan takes, and every file of the ring, has an mtime no
// later than what the loop recorded for it and the scan asked for; the
// first scans back-date the spare marker with touch, and once the ring
// holds a marker old enough, scans take it and run no touch; date runs
// once. It takes the real clock eight seconds.
func TestStreamScanMarks(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tmp, out, log := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "log")
			dirs := []string{t.TempDir(), t.TempDir()}
			old := time.Now().Add(-time.Hour)
			for _, d := range dirs {
				writeTree(t, d, map[string]string{"a": "a", "sub/b": "b"})
				for _, p := range []string{"a", "sub/b", "sub", "."} {
					must(t, os.Chtimes(filepath.Join(d, p), old, old))
				}
			}
			const rounds = 8
			driver := `TMPDIR=$1 log=$2 out=$3 chunk=$4 d1=$5 d2=$6 n=$7
` + shadowed + `
s1='' s2='' i=0
while [ $i -lt $n ]; do
  for m in 1 2; do
    eval "d=\$d$m since=\$s$m"
    livesync_mark
    for k in 0 1 2 3 4 5 6 7; do
      eval "h=\${livesync_mh$k-}"
      [ -z "$h" ] || echo "slot $k $h $(command stat -c %Y "$livesync_dir/$k")"
    done
    # What the scan will take: its own pick runs in its subshell.
    livesync_pick "$since"
    p=-; [ -z "$livesync_m" ] || p="${livesync_m##*/} $(command stat -c %Y "$livesync_m")"
    echo "scan $i $m ${since:-0} $p"
    ( livesync_scan "$d" "$since" "$chunk" 0 . ) >"$out/$i.$m" || exit
    eval "s$m=\$((livesync_t - 2))"
    echo "$i" >"$d/w$i"
  done
  sleep 1
  i=$((i + 1))
done
`
			got := runMarks(t, ex, driver, tmp, log, out, listChunkScript, dirs[0], dirs[1], strconv.Itoa(rounds))
			spares := 0
			for l := range strings.Lines(got) {
				f := strings.Fields(l)
				switch {
				case f[0] == "slot" && len(f) == 4:
					if h, mtime := atoi(t, f[2]), atoi(t, f[3]); mtime > h {
						t.Errorf("ring file %s has mtime %d, later than its bound %d", f[1], mtime, h)
					}
				case f[0] == "scan" && (len(f) == 5 || len(f) == 6):
					i, m, since := atoi(t, f[1]), f[2], atoi(t, f[3])
					r := scanFile(t, filepath.Join(out, fmt.Sprintf("%d.%s", i, m)))
					if i == 0 {
						if r.Since || f[4] != "-" {
							t.Errorf("scan %d.%s without a since: %+v, marker %q", i, m, r, f[4:])
						}
						continue
					}
					if len(f) != 6 || !r.Since || !r.Complete {
						t.Fatalf("scan %d.%s since %d: marker %q, %+v", i, m, since, f[4:], r)
					}
					if mtime := atoi(t, f[5]); mtime > since {
						t.Errorf("scan %d.%s since %d took marker %s with mtime %d", i, m, since, f[4], mtime)
					}
					if w := fmt.Sprintf("./w%d", i-1); !slices.Contains(scanNames(r), w) {
						t.Errorf("scan %d.%s lacks %s, written in the second of the scan before: %q", i, m, w, scanNames(r))
					}
					switch {
					case f[4] == "s":
						spares++
					case i == 1 && m == "1":
						t.Errorf("scan 1.1 took ring file %s: none is old enough yet", f[4])
					}
					if i >= rounds-2 && f[4] == "s" {
						t.Errorf("scan %d.%s back-dated the spare marker: the ring should hold one by now", i, m)
					}
				default:
					t.Fatalf("unexpected line %q", l)
				}
			}
			b, err := os.ReadFile(log)
			must(t, err)
			calls := map[string]int{}
			for l := range strings.Lines(string(b)) {
				calls[strings.Fields(l)[0]]++
			}
			// The driver's pick and the scan's each back-date the spare.
			if calls["date"] != 1 || calls["touch"] != 2*spares || calls["mktemp"] != 1 || calls["readlink"] != 1 {
				t.Errorf("calls %v, want one date, mktemp and readlink, and %d touches", calls, 2*spares)
			}
		})
	}
}

// With no ring file old enough and a spare that touch can't back-date, a
// scan lists everything; so does one asked for a time later than now may
// be.
func TestStreamScanMarksFull(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			dir, out := t.TempDir(), t.TempDir()
			writeTree(t, dir, map[string]string{"a": "a"})
			old := time.Now().Add(-time.Hour)
			must(t, os.Chtimes(filepath.Join(dir, "a"), old, old))
			must(t, os.Chtimes(dir, old, old))
			driver := `TMPDIR=$1 out=$2 chunk=$3 d=$4
livesync_mark
( livesync_scan "$d" "$((livesync_t - 2))" "$chunk" 0 . ) >"$out/spare"
livesync_mark
( livesync_scan "$d" "$((livesync_h + 1))" "$chunk" 0 . ) >"$out/later"
touch() { return 1; }
livesync_mark
( livesync_scan "$d" "$((livesync_t - 2))" "$chunk" 0 . ) >"$out/notouch"
`
			runMarks(t, ex, driver, t.TempDir(), out, listChunkScript, dir)
			for file, since := range map[string]bool{"spare": true, "later": false, "notouch": false} {
				r := scanFile(t, filepath.Join(out, file))
				if r.Since != since || !r.Complete || slices.Contains(scanNames(r), "./a") == since {
					t.Errorf("%s: %+v, names %q; want since %v", file, r, scanNames(r), since)
				}
			}
		})
	}
}

// A wall clock set back: once date reads below what the loop derived, the
// next scan lists everything, and the one after looks back again. The loop
// is made to derive a clock 100 s ahead of date's (its base moved, and due
// again); without /proc/uptime, date itself goes back. A clock ahead of
// what the loop derived is no reason for a full listing.
func TestStreamScanMarksClockBack(t *testing.T) {
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			dir, out := t.TempDir(), t.TempDir()
			writeTree(t, dir, map[string]string{"a": "a"})
			driver := `TMPDIR=$1 out=$2 chunk=$3 d=$4
scan() { livesync_mark; echo "$1 ${livesync_full:-0}"; ( livesync_scan "$d" "$since" "$chunk" 0 . ) >"$out/$1"; }
livesync_mark; since=$((livesync_t - 2))
livesync_d=$((livesync_d + 100)) livesync_b=$((livesync_b - 60))
scan back
scan after
livesync_d=$((livesync_d - 100)) livesync_b=$((livesync_b - 60))
scan ahead
livesync_up() { livesync_u=''; return 1; }
now=$(date +%s)
date() { echo "$now"; }
scan nouptime
now=$((now - 10))
scan nouptime-back
now=$((now + 10))
scan nouptime-after
`
			got := runMarks(t, ex, driver, t.TempDir(), out, listChunkScript, dir)
			want := "back 1\nafter 0\nahead 0\nnouptime 0\nnouptime-back 1\nnouptime-after 0\n"
			if got != want {
				t.Errorf("livesync_full after each mark:\n%s\nwant\n%s", got, want)
			}
			for file, since := range map[string]bool{"back": false, "after": true, "ahead": true, "nouptime": true, "nouptime-back": false, "nouptime-after": true} {
				if r := scanFile(t, filepath.Join(out, file)); r.Since != since || !r.Complete {
					t.Errorf("%s: %+v, want since %v", file, r, since)
				}
			}
		})
	}
}

// A scan of a quiet tree as the loop runs it, once the ring is warm, costs
// no process but its subshell and its find: no date, touch, mktemp or
// readlink (shadowed: busybox runs its applets without an exec), and, with
// strace installed, no fork or exec but those.
func TestStreamScanMarksNoProcess(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err == nil {
		err = exec.Command(strace, "-o", os.DevNull, "true").Run()
	}
	if err != nil {
		t.Logf("no working strace (%v): checking the shadowed commands only", err)
		strace = ""
	}
	for name, ex := range executors(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, out, tmp := t.TempDir(), t.TempDir(), t.TempDir()
			log, trace := filepath.Join(tmp, "log"), filepath.Join(tmp, "trace")
			begin, end := filepath.Join(tmp, "begin"), filepath.Join(tmp, "end")
			for _, f := range []string{begin, end} {
				must(t, os.WriteFile(f, nil, 0o644))
			}
			writeTree(t, dir, map[string]string{"a": "a", "sub/b": "b"})
			old := time.Now().Add(-time.Hour)
			for _, p := range []string{"a", "sub/b", "sub", "."} {
				must(t, os.Chtimes(filepath.Join(dir, p), old, old))
			}
			const steady = 3
			driver := `TMPDIR=$1 log=$2 out=$3 chunk=$4 d=$5 begin=$6 end=$7 n=$8
` + shadowed + `
scan() { livesync_mark; ( livesync_scan "$d" "$since" "$chunk" 0 . ) >"$out/$1" || exit; since=$((livesync_t - 2)); }
since='' i=0
while [ $i -lt 7 ]; do scan warm; sleep 1; i=$((i + 1)); done
echo steady >>"$log"
true <"$begin"
i=0
while [ $i -lt $n ]; do scan $i; i=$((i + 1)); done
true <"$end"
echo end >>"$log"
`
			args := []string{tmp, log, out, listChunkScript, dir, begin, end, strconv.Itoa(steady)}
			if strace == "" {
				runMarks(t, ex, driver, args...)
			} else {
				// The shell strace runs is the first sh on PATH: busybox's, or the host's.
				runShell(t, ex, append([]string{"sh", "-c", traceShell, strace, trace, StreamScanFuncs() + driver}, args...))
			}
			for i := range steady {
				if r := scanFile(t, filepath.Join(out, strconv.Itoa(i))); !r.Since || !r.Complete || len(scanNames(r)) != 0 {
					t.Errorf("steady scan %d: %+v, names %q", i, r, scanNames(r))
				}
			}
			b, err := os.ReadFile(log)
			must(t, err)
			_, after, _ := strings.Cut(string(b), "steady\n")
			if after != "end\n" && !strings.HasPrefix(after, "end\n") {
				t.Errorf("steady scans ran %q", strings.TrimSuffix(after, "end\n"))
			}
			if strace != "" {
				forks, execs := traceSteady(t, trace, begin, end)
				t.Logf("%d steady scans: %d forks, execs %q", steady, forks, execs)
				if forks != 2*steady || slices.ContainsFunc(execs, func(e string) bool { return e != "find" }) {
					t.Errorf("%d steady scans: %d forks (want %d: a subshell and a find each), execs %q (want find only)", steady, forks, 2*steady, execs)
				}
			}
		})
	}
}

// traceShell runs the shell $2 under strace ($0), with its log in $1 and
// the rest as its arguments, with $0 livesync-stream.
const traceShell = `s=$0 l=$1 c=$2; shift 2; exec "$s" -f -qq -o "$l" -e trace=execve,clone,clone3,fork,vfork,openat sh -c "$c" livesync-stream "$@"`

var (
	traceFork = regexp.MustCompile(`^\d+\s+(clone3?|v?fork)\(`)
	traceExec = regexp.MustCompile(`^\d+\s+execve\("[^"]*", \["([^"]*)"`)
)

// traceSteady counts the forks in strace's log between the opens of
// begin and end, and lists the argv[0] of each exec there.
func traceSteady(t *testing.T, trace, begin, end string) (forks int, execs []string) {
	t.Helper()
	f, err := os.Open(trace)
	must(t, err)
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.Contains(l, "openat(") && strings.Contains(l, `"`+begin+`"`):
			in = true
		case strings.Contains(l, "openat(") && strings.Contains(l, `"`+end+`"`):
			return forks, execs
		case !in:
		case traceFork.MatchString(l):
			forks++
		case traceExec.MatchString(l):
			execs = append(execs, traceExec.FindStringSubmatch(l)[1])
		}
	}
	must(t, sc.Err())
	t.Fatalf("no open of %s and %s in %s", begin, end, trace)
	return 0, nil
}
