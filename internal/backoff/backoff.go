// Package backoff spaces out the retries of Flint's clients: delays that
// double from a minimum up to a cap, each one jittered so that clients
// turned away by the same failure do not all come back at the same instant.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// The schedule of Flint's clients: about 10 ms after the first failure,
// doubling up to about a second, which is longer than a raft election
// takes, so that a client waiting out an election asks about once per
// election timeout.
const (
	DefaultMin = 10 * time.Millisecond
	DefaultMax = time.Second
)

// Backoff is the delays of one retry loop. Make one with New or Default; it
// belongs to one goroutine.
type Backoff struct {
	max time.Duration
	// next is the next delay, before jitter. Invariant: 0 < next <= max.
	next time.Duration
}

// New returns a Backoff whose first delay is about min and which doubles up
// to max. It panics unless 0 < min <= max: the bounds are the caller's
// constants, not input.
func New(min, max time.Duration) Backoff {
	if min <= 0 || min > max {
		panic("backoff: want 0 < min <= max")
	}
	return Backoff{max: max, next: min}
}

// Default returns New(DefaultMin, DefaultMax).
func Default() Backoff { return New(DefaultMin, DefaultMax) }

// Wait sleeps for the next delay, or until ctx ends and then returns ctx's
// error. Each delay is drawn uniformly from [d/2, d], where d doubles from
// the minimum at each call up to the maximum.
func (b *Backoff) Wait(ctx context.Context) error {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Next returns the next delay, jittered as Wait's are, and advances the
// schedule, for a caller that waits in its own way.
func (b *Backoff) Next() time.Duration {
	d := b.next
	b.next = min(2*d, b.max)
	return d/2 + rand.N(d/2+1)
}
