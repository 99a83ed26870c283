package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/flintkv/flint/client"
)

// loadKey says what a load phase stored: a target that holds it already,
// from an earlier run of the same session, is not loaded again.
type loadKey struct {
	keys      keyFormat
	records   int
	valueSize int
}

// Loading sends batches of SETs of about loadMSetBytes each from
// loadWorkers goroutines at once; the client pipelines them over its
// connections, split among a sharded cluster's groups (an MSET of keys in
// several slots would be refused there).
const (
	loadMSetBytes = 64 << 10
	loadMaxKeys   = 1000
	loadWorkers   = 8
)

// load stores records key numbers 0 .. records-1, all with one random value.
func (b *clientBackend) load(ctx context.Context, k loadKey) error {
	per := max(1, min(loadMaxKeys, loadMSetBytes/(k.valueSize+16)))
	value := make([]byte, k.valueSize)
	for i := range value {
		value[i] = byte('a' + rand.IntN(26))
	}
	var next atomic.Int64 // the first key number of the next MSET
	errs := make(chan error, loadWorkers)
	var wg sync.WaitGroup
	for range loadWorkers {
		wg.Go(func() { errs <- b.loadChunks(ctx, k, per, value, &next) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return fmt.Errorf("bench: loading %d records into %s: %w", k.records, b.url, err)
		}
	}
	return nil
}

// loadChunks sends batches of per SETs until every key number is taken.
func (b *clientBackend) loadChunks(ctx context.Context, k loadKey, per int, value []byte, next *atomic.Int64) error {
	batch := b.c.Batch()
	for {
		first := int(next.Add(int64(per))) - per
		if first >= k.records {
			return nil
		}
		for n := first; n < min(first+per, k.records); n++ {
			batch.Set(k.keys.key(uint64(n)), value)
		}
		replies, err := batch.Exec(ctx)
		if err != nil {
			return err
		}
		for _, r := range replies {
			if r.IsError() {
				return &client.ReplyError{Msg: string(r.Str)}
			}
		}
	}
}
