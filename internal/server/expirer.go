package server

import (
	"time"

	"github.com/flintkv/flint/internal/store"
)

// The expirer removes expired keys through the log (docs/EXPIRY.md). Every
// ExpireDelay/2 it asks the store for the keys whose deadlines have passed
// by this server's clock (store.AppendDue), and applies a batch of
// OpExpireDue entries that name them, which the backend stamps with the
// leader's time: the stamp advances the store's clock, and each key is
// removed if its deadline is before it (the ordinary delete path, so
// WATCH sees it). So a key is gone within about ExpireDelay/2 and a commit
// after its deadline, even when nothing else is written. A batch names at
// most expireBatch keys, and the expirer sends the next only once the last
// is applied, so a mass expiry goes as a stream of bounded batches that
// other clients' writes interleave with, not as one long stall; reads
// meanwhile see every key whose deadline the clock has passed as gone.
//
// Only a leader's expirer proposes: on a member that knows another leads,
// it does nothing. A batch that fails (leadership lost, shutdown) is left;
// the keys are found due again next time.

// expireBatch is the most keys one expirer batch removes.
const expireBatch = 1024

// expire runs the expirer until Shutdown.
func (s *Server) expire() {
	defer s.wg.Done()
	tick := time.NewTicker(max(s.cfg.ExpireDelay/2, time.Millisecond))
	defer tick.Stop()
	var b store.Batch
	for {
		select {
		case <-s.stopping:
			return
		case <-tick.C:
		}
		for n := expireBatch; n == expireBatch && !s.closing.Load(); { // while keys are due
			n = s.expireOnce(&b)
		}
	}
}

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
