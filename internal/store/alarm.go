package store

import (
	"math"
	"sync/atomic"
)

// alarm tells the store's expirer (server's) when a key is given a
// deadline earlier than the one it sleeps until, so that it can sleep
// until the earliest deadline instead of waking on a fixed tick: an idle
// store with no deadline costs nothing.
//
// Invariant: until is at most the earliest deadline that the waiter knows
// of since it last called NextDeadline; a deadline set before until
// lowers until to it and leaves a wake-up in c. So after NextDeadline
// returns t, a deadline earlier than t set at any later time is either
// seen by the waiter's next NextDeadline or leaves a wake-up in c.
type alarm struct {
	until atomic.Int64 // Unix ms; math.MaxInt64 while the waiter knows of none
	c     chan struct{}
}

func newAlarm() *alarm {
	a := &alarm{c: make(chan struct{}, 1)}
	a.until.Store(math.MaxInt64)
	return a
}

// set records that a key got the deadline at: one atomic load unless at
// is earlier than the waiter knows of.
func (a *alarm) set(at int64) {
	if at >= a.until.Load() {
		return
	}
	lower(&a.until, at)
	a.wake()
}

// wake leaves a wake-up in c, unless one is waiting.
func (a *alarm) wake() {
	select {
	case a.c <- struct{}{}:
	default:
	}
}

// lower sets v to x if x is smaller.
func lower(v *atomic.Int64, x int64) {
	for {
		cur := v.Load()
		if x >= cur || v.CompareAndSwap(cur, x) {
			return
		}
	}
}

// NextDeadline returns the earliest deadline of any key, in Unix ms
// (which may have passed), or math.MaxInt64 if no key has one. It arms
// DeadlineSet: from this call on, a key given an earlier deadline sends a
// wake-up. Only one goroutine (the expirer) may wait on it.
func (s *Store) NextDeadline() int64 {
	s.alarm.until.Store(math.MaxInt64) // any deadline set from here on wakes the waiter...
	next := int64(math.MaxInt64)
	for i := range s.stripes {
		st := &s.stripes[i]
		st.mu.RLock()
		if h := st.mu.dl.heap; len(h) > 0 { // the top is live: see deadlines
			next = min(next, h[0].at)
		}
		st.mu.RUnlock()
	}
	lower(&s.alarm.until, next) // ...until it knows one this early
	return next
}

// DeadlineSet receives a value after a key is given a deadline earlier
// than NextDeadline last returned (or any deadline, before the first
// call), and after Replaced. A wake-up may also be spurious: the waiter
// calls NextDeadline again.
func (s *Store) DeadlineSet() <-chan struct{} { return s.alarm.c }

// Replaced wakes the waiter on DeadlineSet: a backend that replaces its
// store with another (a snapshot's) calls it on the old one, so that the
// expirer moves to the new one.
func (s *Store) Replaced() { s.alarm.wake() }
