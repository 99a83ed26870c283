package client_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/server"
)

// BenchmarkClientParallelGet runs GETs from many goroutines at once
// (-cpu sets GOMAXPROCS; SetParallelism multiplies it). Automatic
// pipelining lets the concurrent calls share writes and round trips, so
// ns/op falls far below one round trip; compare BenchmarkClientSerialGet.
//
//	go test -run - -bench ClientParallelGet -benchmem ./client/
func BenchmarkClientParallelGet(b *testing.B) {
	for _, g := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("goroutines=%dxGOMAXPROCS", g), func(b *testing.B) {
			c := benchClient(b)
			b.SetParallelism(g)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for i := 0; pb.Next(); i++ {
					if _, err := c.Get(ctx, benchKey(i)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkClientSerialGet runs GETs one after another: one round trip
// each, the baseline that pipelining improves on.
func BenchmarkClientSerialGet(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Get(ctx, benchKey(i)); err != nil {
			b.Fatal(err)
		}
	}
}

var poolSize = 2

const benchKeys = 1000

var keys = func() (k [benchKeys]string) {
	for i := range k {
		k[i] = fmt.Sprint(i)
	}
	return k
}()

func benchKey(i int) string { return keys[i%benchKeys] }

// benchClient starts a server holding benchKeys keys of 128-byte values.
func benchClient(b *testing.B) *client.Client {
	_, c := connect(b, server.Config{}, client.WithPoolSize(poolSize))
	batch := c.Batch()
	for i := range benchKeys {
		batch.Set(benchKey(i), make([]byte, 128))
	}
	if _, err := batch.Exec(context.Background()); err != nil {
		b.Fatal(err)
	}
	return c
}
