package server

import (
	"time"

	"github.com/flintkv/flint/internal/store"
)

// The expirer removes expired keys through the log (docs/EXPIRY.md). It
// sleeps until the earliest deadline its store holds has passed (by this
// server's clock or the store's, whichever is ahead), or until a key is
// given an earlier one (store.DeadlineSet), but wakes no more often than
// every ExpireDelay/2; then it asks the store for the keys whose deadlines
// have passed (store.AppendDue), and applies a batch of OpExpireDue
// entries that name them, which the backend stamps with the leader's
// time: the stamp advances the store's clock, and each key is removed if
// its deadline is before it (the ordinary delete path, so WATCH sees it).
// So a key is gone within about ExpireDelay/2 and a commit after its
// deadline, even when nothing else is written, and a store with no
// deadline costs no wake-ups. A batch names at most expireBatch keys, and
// the expirer sends the next only once the last is applied, so a mass
// expiry goes as a stream of bounded batches that other clients' writes
// interleave with, not as one long stall; reads meanwhile see every key
// whose deadline the clock has passed as gone.
//
// Only a leader's expirer proposes: on a member that knows another leads,
// it does nothing, and while keys are due it looks again every
// ExpireDelay/2, so that it takes over within that once it leads. A batch
// that fails (leadership lost, shutdown) is left; the keys are found due
// again next time. A backend that replaces its store (a replica that
// installs a snapshot) wakes the expirer (store.Replaced), which then
// watches the new one.

// expireBatch is the most keys one expirer batch removes.
const expireBatch = 1024

// expire runs the expirer until Shutdown.
func (s *Server) expire() {
	defer s.wg.Done()
	period := max(s.cfg.ExpireDelay/2, time.Millisecond)
	timer := time.NewTimer(expireIdle)
	defer timer.Stop()
	var b store.Batch
	var last time.Time // of the last look at the due keys
	for {
		st := s.kv.Store()
		wait := max(untilDue(st), time.Until(last.Add(period)))
		if wait <= 0 {
			last = time.Now()
			for n := expireBatch; n == expireBatch && !s.closing.Load(); { // while keys are due
				n = s.expireOnce(&b)
			}
			continue
		}
		timer.Reset(wait)
		select {
		case <-s.stopping:
			return
		case <-st.DeadlineSet(): // a key got an earlier deadline, or st was replaced
		case <-timer.C:
		}
	}
}

// untilDue returns how long until the earliest deadline in st has passed
// by this server's clock or st's, whichever is ahead (a key has expired
// once the clock is past its deadline, in whole milliseconds), but at most
// expireIdle.
func untilDue(st *store.Store) time.Duration {
	next := st.NextDeadline()
	now := max(time.Now().UnixMilli(), st.Clock()/1e6)
	switch {
	case next < now:
		return 0
	case next-now >= expireIdle.Milliseconds():
		return expireIdle
	}
	return time.Duration(next+1-now) * time.Millisecond
}

// expireIdle is the longest the expirer sleeps: a store with no deadline
// wakes it hardly ever.
const expireIdle = time.Hour

// expireOnce applies one batch that removes up to expireBatch due keys,
// unless another member leads, and returns how many keys it named.
func (s *Server) expireOnce(b *store.Batch) int {
	if s.cluster != nil {
		if _, other := s.cluster.Redirect(); other {
			return 0
		}
	}
	b.Reset()
	n := s.kv.Store().AppendDue(b, time.Now().UnixMilli(), expireBatch)
	if n == 0 {
		return 0
	}
	if err := s.kv.Apply(s.ctx, b.Bytes(), nil); err != nil {
		s.log.Debug("expirer: removing expired keys failed; retrying later", "keys", n, "err", err)
		return 0
	}
	return n
}
