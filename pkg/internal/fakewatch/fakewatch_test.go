package fakewatch

import (
	"errors"
	"testing"

	"github.com/livesync-dev/kubectl-livesync/pkg/watch"
)

func TestWatcher(t *testing.T) {
	f := New()
	go func() {
		f.Send(watch.Event{Root: "/r", Path: "/r/a"})
		f.SendError(errors.New("boom"))
	}()
	if ev := <-f.Events(); ev.Path != "/r/a" {
		t.Errorf("got %+v", ev)
	}
	if err := <-f.Errors(); err == nil || err.Error() != "boom" {
		t.Errorf("got %v", err)
	}

	blocked := make(chan bool)
	go func() { blocked <- f.Send(watch.Event{Path: "never read"}) }()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if <-blocked {
		t.Error("Send with no reader reported delivery after Close")
	}
	if f.Send(watch.Event{}) || f.SendError(errors.New("late")) {
		t.Error("Send after Close reported delivery")
	}
	if _, ok := <-f.Events(); ok {
		t.Error("Events not closed")
	}
	if !f.Closed() {
		t.Error("Closed() = false after Close")
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
