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

// Loading sends MSETs of about loadMSetBytes each from loadWorkers
// goroutines at once; the client pipelines them over its connections.
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

// loadChunks sends MSETs of per keys until every key number is taken.
func (b *clientBackend) loadChunks(ctx context.Context, k loadKey, per int, value []byte, next *atomic.Int64) error {
	kvs := make([]client.KV, 0, per)
	for {
		first := int(next.Add(int64(per))) - per
		if first >= k.records {
			return nil
		}
		kvs = kvs[:0]
		for n := first; n < min(first+per, k.records); n++ {
			kvs = append(kvs, client.KV{Key: k.keys.key(uint64(n)), Value: value})
		}
		if err := b.c.MSet(ctx, kvs...); err != nil {
			return err
		}
	}
}
