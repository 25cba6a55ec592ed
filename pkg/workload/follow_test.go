package workload

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestFollowCallsEachTickAndWarnsOnError(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan struct{})
	warned := make(chan error, 3)
	n := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Follow(ctx, clk, 10*time.Second, func(context.Context) error {
			n++
			calls <- struct{}{}
			if n == 2 {
				return errors.New("registry away")
			}
			return nil
		}, func(err error) { warned <- err })
	}()
	for i := 1; i <= 3; i++ {
		for !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		clk.Step(10 * time.Second)
		<-calls
	}
	cancel()
	<-done
	if n != 3 {
		t.Fatalf("fn ran %d times, want 3", n)
	}
	select {
	case err := <-warned:
		if err.Error() != "registry away" {
			t.Fatalf("warned %v", err)
		}
	default:
		t.Fatal("the error of the second tick was not reported")
	}
	if len(warned) != 0 {
		t.Fatalf("%d extra warnings", len(warned))
	}
}

func TestCheckFollowInterval(t *testing.T) {
	if err := CheckFollowInterval(500 * time.Millisecond); err == nil || err.Error() != "--interval 500ms is too short: use 1s or more" {
		t.Fatalf("got %v", err)
	}
	if err := CheckFollowInterval(time.Second); err != nil {
		t.Fatal(err)
	}
}
