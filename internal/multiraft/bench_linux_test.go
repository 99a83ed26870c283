package multiraft

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/vfs"
)

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// campaignAll makes node i%len(nodes) stand for group i's election, and
// waits for every group to have a leader on every node.
func (c *cluster) campaignAll(b *testing.B, spread bool) {
	for i, g := range c.groups {
		nd := c.nodes[0]
		if spread {
			nd = c.nodes[i%len(c.nodes)]
		}
		if err := nd.host.Campaign(g); err != nil {
			b.Fatal(err)
		}
	}
	waitFor(b, "a leader for every group", func() bool {
		for _, nd := range c.nodes {
			for _, g := range c.groups {
				if nd.host.Leader(g) == 0 {
					return false
				}
			}
		}
		return true
	})
}

// BenchmarkIdleGroups runs 1,000 idle groups on each of 3 nodes, all in
// this process, with raft's ticks of 100 ms, and reports the process's
// CPU per node while they idle, in percent of one core: with quiescence,
// and without it (every group ticking and its leader sending heartbeats).
// Each op is 100 ms of idling. See docs/PERFORMANCE.md.
//
//	go test -run '^$' -bench BenchmarkIdleGroups -benchtime 30x ./internal/multiraft
func BenchmarkIdleGroups(b *testing.B) {
	for _, quiesce := range []bool{true, false} {
		b.Run(fmt.Sprintf("quiesce=%t", quiesce), func(b *testing.B) {
			cfg := Config{}
			if !quiesce {
				cfg.QuiesceTicks = 1 << 30
			}
			c := newCluster(b, 3, 1000, 1, cfg)
			c.campaignAll(b, true)
			if quiesce {
				waitFor(b, "every group quiesced", func() bool {
					return c.nodes[0].host.Quiesced()+c.nodes[1].host.Quiesced()+c.nodes[2].host.Quiesced() == 3000
				})
			}
			cpu0, start := processCPU(b), time.Now()
			b.ResetTimer()
			for range b.N {
				time.Sleep(100 * time.Millisecond)
			}
			b.StopTimer()
			cpu := processCPU(b) - cpu0
			b.ReportMetric(100*cpu.Seconds()/time.Since(start).Seconds()/3, "%cpu/node")
		})
	}
}

// BenchmarkHostWrites proposes 128-byte values from 64 goroutines to 1,
// 16 or 256 groups, all led by node 1 at first, on 3 nodes in this process, each
// with its shared log on the disk, and reports the process's CPU per
// write acknowledged (all 3 members' work: divide by 3 for a node's) and
// the fsyncs per write of all 3 logs. See docs/PERFORMANCE.md.
//
//	go test -run '^$' -bench BenchmarkHostWrites -benchtime 20000x ./internal/multiraft
func BenchmarkHostWrites(b *testing.B) {
	for _, groups := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			fss, dirs := make([]vfs.FS, 3), make([]string, 3)
			counters := make([]*vfs.Faulty, 3)
			for i := range fss {
				counters[i] = vfs.NewFaulty(vfs.OS)
				fss[i], dirs[i] = counters[i], b.TempDir()
			}
			c := newClusterOn(b, fss, dirs, groups, 1, Config{}, 64<<20)
			c.campaignAll(b, false)
			syncs := func() (n int64) {
				for _, f := range counters {
					n += f.Syncs()
				}
				return n
			}
			value := make([]byte, 128)
			hosts := []*Host{c.nodes[0].host, c.nodes[1].host, c.nodes[2].host}
			var next atomic.Int64
			var wg sync.WaitGroup
			syncs0, cpu0 := syncs(), processCPU(b)
			b.ResetTimer()
			for range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						// Under load a group may elect another leader: the
						// write goes to it.
						if by, _ := c.write(c.groups[int(i)%groups], string(value), func() []*Host { return hosts }); by == nil {
							b.Error("a write was not acknowledged")
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
			b.ReportMetric(float64(syncs()-syncs0)/float64(b.N), "fsyncs/op")
		})
	}
}
