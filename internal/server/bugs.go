package server

import (
	"sync"
	"time"

	"github.com/flintkv/flint/internal/store"
)

// staleView is the injected bug bugs.StaleRead: a view of the store that is
// refreshed only every 200 ms. It exists to prove that flint check catches
// stale reads; see package bugs.
type staleView struct {
	mu   sync.Mutex
	view *store.Snapshot
	at   time.Time
}

// staleLook looks key up, for GET, in the stale view (see look): it
// appends what key holds there to c.got. It only reads the store, and may
// run on the apply thread, as look does.
func (c *conn) staleLook(key []byte) {
	sv := &c.srv.stale
	sv.mu.Lock()
	if sv.view == nil || time.Since(sv.at) > 200*time.Millisecond {
		sv.view, sv.at = c.srv.kv.Store().Snapshot(), time.Now()
	}
	view := sv.view
	sv.mu.Unlock()
	l := lookup{}
	view.Range(key, key, 1, func(_ string, val []byte) bool { l = lookup{val, true}; return false })
	c.got = append(c.got, l)
}
