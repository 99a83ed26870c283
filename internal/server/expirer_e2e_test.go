package server_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
	"github.com/flintkv/flint/internal/store"
)

// swapBackend is server.Local whose store a test replaces, as a replica
// that installs a snapshot does.
type swapBackend struct{ st atomic.Pointer[store.Store] }

func (b *swapBackend) Apply(_ context.Context, batch []byte, done func(int, store.Result)) error {
	return b.st.Load().ApplyBatchAt(batch, store.Stamp{Time: time.Now().UnixNano()}, done)
}

func (b *swapBackend) ReadBarrier(context.Context) error { return nil }
func (b *swapBackend) Store() *store.Store               { return b.st.Load() }

// TestExpirerFollowsReplacedStore: the expirer of a server whose store
// holds no deadline sleeps; once the backend replaces the store with one
// whose key has a deadline (and calls Replaced), the expirer removes the
// key, though nothing else is written.
func TestExpirerFollowsReplacedStore(t *testing.T) {
	b := &swapBackend{}
	b.st.Store(store.New(store.Options{}))
	srv := servertest.StartBackend(t, server.Config{ExpireDelay: 20 * time.Millisecond}, b)
	c := dialRaw(t, srv.Addr)
	c.do("PING") // serving: the expirer is asleep on the first store
	next := store.New(store.Options{})
	var batch store.Batch
	batch.Add(store.OpSetExpire, store.ExpireRelative, []byte("k"), []byte("v"), store.DeadlineArg(30))
	if err := next.ApplyBatchAt(batch.Bytes(), store.Stamp{Time: time.Now().UnixNano()}, nil); err != nil {
		t.Fatal(err)
	}
	b.st.Swap(next).Replaced()
	eventually(t, "the key's removal from the new store", func() bool { return next.Len() == 0 })
}
