package backoff

import (
	"context"
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	b := New(10*time.Millisecond, 50*time.Millisecond)
	for i, want := range []time.Duration{10, 20, 40, 50, 50} {
		want *= time.Millisecond
		if d := b.Next(); d < want/2 || d > want {
			t.Errorf("delay %d = %v, want within [%v, %v]", i, d, want/2, want)
		}
	}
}

func TestWaitEndsWithContext(t *testing.T) {
	b := New(time.Hour, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := b.Wait(ctx); err != context.DeadlineExceeded {
		t.Fatalf("Wait = %v, want DeadlineExceeded", err)
	}
	b = New(time.Millisecond, time.Millisecond)
	if err := b.Wait(context.Background()); err != nil {
		t.Fatalf("Wait = %v, want nil", err)
	}
}
