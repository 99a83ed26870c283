package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
	"github.com/flintkv/flint/internal/store"
)

// BenchmarkLoopbackPipeline measures the server's throughput over loopback
// TCP: several raw connections, run in parallel on every core, each sending
// pipelines of 64 GET/SET commands on 10,000 keys with 32-byte values and
// reading all the replies. One op is one pipeline; ops/s counts commands.
// Client and server share the machine's cores, so compare runs side by side
// (see docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench LoopbackPipeline -benchtime 3s ./internal/server/
func BenchmarkLoopbackPipeline(b *testing.B) {
	const (
		depth = 64
		keys  = 10000
	)
	srv := servertest.Start(b, server.Config{})
	val := make([]byte, 32)
	for i := range keys {
		srv.Store.Apply(store.AppendEntry(nil, store.OpSet, 0, benchKey(i), val))
	}
	for _, mix := range []struct {
		name   string
		setPct int
	}{{"get", 0}, {"set", 100}, {"mixed", 50}} {
		b.Run(mix.name, func(b *testing.B) {
			var seed atomic.Uint64
			b.SetParallelism(2) // connections per core
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				nc, err := net.Dial("tcp", srv.Addr)
				if err != nil {
					b.Error(err)
					return
				}
				defer nc.Close()
				br := bufio.NewReaderSize(nc, 64<<10)
				// Requests are built before timing starts to matter, so
				// the client spends its share of the cores on I/O.
				rng := rand.New(rand.NewPCG(seed.Add(1), 0))
				reqs := make([][]byte, 32)
				for i := range reqs {
					for range depth {
						k := benchKey(rng.IntN(keys))
						if rng.IntN(100) < mix.setPct {
							reqs[i] = protocol.AppendCommand(reqs[i], []byte("SET"), k, val)
						} else {
							reqs[i] = protocol.AppendCommand(reqs[i], []byte("GET"), k)
						}
					}
				}
				for i := 0; pb.Next(); i++ {
					if _, err := nc.Write(reqs[i%len(reqs)]); err != nil {
						b.Error(err)
						return
					}
					for range depth {
						if err := skipReply(br); err != nil {
							b.Error(err)
							return
						}
					}
				}
			})
			b.ReportMetric(float64(b.N)*depth/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

func benchKey(i int) []byte { return []byte("key:" + strconv.Itoa(i)) }

// skipReply reads one reply without keeping it, failing on error replies.
func skipReply(br *bufio.Reader) error {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return err
	}
	if len(line) < 3 {
		return errors.New("short reply line")
	}
	switch line[0] {
	case '+', ':':
		return nil
	case '$':
		n, ok := protocol.ParseInt(line[1 : len(line)-2])
		if !ok {
			return fmt.Errorf("bad bulk header %q", line)
		}
		if n >= 0 {
			_, err = br.Discard(int(n) + 2)
		}
		return err
	}
	return fmt.Errorf("unexpected reply %q", line)
}
