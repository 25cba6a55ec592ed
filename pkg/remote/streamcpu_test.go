//go:build linux

package remote

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// BenchmarkStreamSmallBatch measures what one small batch (an edit: a
// one-file tar) costs the container through the stream, busybox's and GNU's:
// the CPU of the loop and every process under it, from their rusage once the
// loop exited (cpu-µs/op; the loop's start is spread over the batches, so run
// it with -benchtime 300x), beside the wall time.
func BenchmarkStreamSmallBatch(b *testing.B) {
	for name, ex := range map[string]Executor{"busybox": busybox(b), "gnu": &localExecutor{}} {
		b.Run(name, func(b *testing.B) {
			b.Setenv("TMPDIR", b.TempDir())
			root := b.TempDir()
			s := NewStreams(ex, clock.RealClock{}, 30*time.Second)
			send := func(i int) {
				var buf bytes.Buffer
				tw := tar.NewWriter(&buf)
				content := fmt.Sprintf("package main // %d\n", i)
				if err := tw.WriteHeader(&tar.Header{Name: "./edit.txt", Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg, ModTime: time.Unix(1.7e9, 0)}); err != nil {
					b.Fatal(err)
				}
				_, _ = tw.Write([]byte(content))
				_ = tw.Close()
				if _, err := Apply(context.Background(), s, testTarget, "copying files", &ApplyArgs{Root: root, Tar: true}, &buf); err != nil {
					b.Fatal(err)
				}
			}
			send(-1)
			before := childrenCPU(b)
			i := 0
			for b.Loop() {
				send(i)
				i++
			}
			s.CloseAll(10 * time.Second)
			b.ReportMetric(float64((childrenCPU(b)-before).Microseconds())/float64(i), "cpu-µs/op")
		})
	}
}

// childrenCPU is the user and system CPU of this process's children that
// exited and were waited for.
func childrenCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
