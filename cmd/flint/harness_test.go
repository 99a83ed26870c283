package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/seedtest"
)

// TestHarnessPartitioned runs the users' harness's shape without
// replication as its fuzzer does: three partitions, and five line clients
// (`flint harness client`) on the five shared keys, each sending a random
// sequence of PUT, SWAP, GET and DELETE. Midway, the server of a partition
// that holds some of the keys is killed with SIGKILL, and restarted on its
// data directory 1 to 2 s later. Every command must be answered (slowly
// while the server is down: no client may give up or exit), and the
// answers, as a history, must be linearizable; after the workload every key
// is read once more, so that a write lost in the crash fails the check too.
func TestHarnessPartitioned(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a sharded cluster and five clients for seconds")
	}
	seed := seedtest.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0)) // the workload draws from streams 1, 2, ...
	const clients, ops = 5, 300
	s := startSharded(t, 3)
	parts := keyPartitions(len(s.servers))
	down := parts[rng.IntN(len(parts))]
	downFor := time.Second + time.Duration(rng.Int64N(int64(time.Second)))
	t.Logf("partition %d's server (of keys %v) will be down for %v", down, partitionKeys(down, len(s.servers)), downFor.Round(time.Millisecond))

	r := startLineRun(t, seed, clients, s.manager)
	faulted := make(chan struct{})
	go func() {
		defer close(faulted)
		if !r.awaitAnswered(clients * ops / 2) {
			return
		}
		start := r.now()
		s.kill(down)
		time.Sleep(downFor)
		if err := s.tryStart(down); err != nil {
			t.Errorf("restarting partition %d's server: %v", down, err)
			return
		}
		r.fault(fmt.Sprintf("kill partition %d", down), start, r.now())
	}()
	r.run(ops)
	<-faulted
	r.finalReads()
	r.stop()
	t.Log(r.latencies())
	r.check(fmt.Sprintf("go test ./cmd/flint -run TestHarnessPartitioned -seed %d", seed))
}

// TestHarnessReplicated runs the users' harness's shape with replication:
// three manager replicas, two partitions of replication factor 5, and five
// line clients on the five shared keys as in TestHarnessPartitioned. Two
// replicas of a partition that holds some of the keys are killed with
// SIGKILL one after the other, a third and two thirds of the way through
// the workload, one of them the partition's leader (first or second, as
// the seed draws), and stay down. The partition keeps a majority, so every
// command must be answered, and the history must be linearizable.
func TestHarnessReplicated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 13 server processes and five clients for seconds")
	}
	seed := seedtest.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	const clients, ops, partitions, rf = 5, 150, 2, 5
	h := startReplicatedHarness(t, partitions, rf)
	parts := keyPartitions(partitions)
	part := parts[rng.IntN(len(parts))]
	leaderFirst := rng.IntN(2) == 0
	t.Logf("partition %d (of keys %v) will lose two replicas, the leader first: %v", part, partitionKeys(part, partitions), leaderFirst)

	r := startLineRun(t, seed, clients, strings.Join(h.managers, ","))
	faulted := make(chan struct{})
	go func() {
		defer close(faulted)
		for i := range 2 {
			if !r.awaitAnswered(clients * ops * (i + 1) / 3) {
				return
			}
			lead, err := h.leader(part)
			if err != nil {
				t.Errorf("partition %d: %v", part, err)
				return
			}
			victim, kind := lead, fmt.Sprintf("kill-leader partition %d replica %d", part, lead)
			if leaderFirst != (i == 0) {
				victim = h.follower(rng, part, lead)
				kind = fmt.Sprintf("kill partition %d replica %d", part, victim)
			}
			start := r.now()
			h.kill(h.servers[part][victim])
			r.fault(kind, start, r.now())
			t.Logf("%s at %v", kind, time.Duration(start).Round(time.Millisecond))
		}
	}()
	r.run(ops)
	<-faulted
	r.finalReads()
	r.stop()
	t.Log(r.latencies())
	r.check(fmt.Sprintf("go test ./cmd/flint -run TestHarnessReplicated -seed %d", seed))
}

// keyPartitions returns the partitions, of n, that hold some of
// harnessKeys.
func keyPartitions(n int) []int {
	var parts []int
	for _, k := range harnessKeys {
		parts = append(parts, partitionOf(k, n))
	}
	slices.Sort(parts)
	return slices.Compact(parts)
}

// partitionKeys returns those of harnessKeys that partition p, of n,
// holds.
func partitionKeys(p, n int) []string {
	return slices.DeleteFunc(slices.Clone(harnessKeys), func(k string) bool { return partitionOf(k, n) != p })
}

// replicatedHarness is a cluster of `flint harness` processes on loopback
// in the shape of the users' harness with replication: three manager
// replicas (the meta group) and partitions of rf server replicas each.
type replicatedHarness struct {
	*harnessProcs
	managers []string // the managers' client addresses
	servers  [][]int  // the process of each replica of each partition
}

// startReplicatedHarness starts the managers and then the servers, with
// the harness's arguments, and waits until the managers' CLUSTER INFO says
// every partition has a leader.
func startReplicatedHarness(t *testing.T, partitions, rf int) *replicatedHarness {
	const managers = 3
	n := managers + partitions*rf
	addrs := freeAddrs(t, 2*n)
	clients, peers := addrs[:n], addrs[n:] // managers first, then partition-major
	h := &replicatedHarness{harnessProcs: newHarnessProcs(t), managers: clients[:managers]}
	serverList, managerList := strings.Join(clients[managers:], ","), strings.Join(h.managers, ",")
	var mids, sids []int
	for m := range managers {
		mids = append(mids, h.add(clients[m], "manager-replica", fmt.Sprint(m), port(t, clients[m]), port(t, peers[m]),
			othersOf(peers[:managers], m), fmt.Sprint(rf), serverList, filepath.Join(t.TempDir(), fmt.Sprint("m", m))))
	}
	for p := range partitions {
		h.servers = append(h.servers, nil)
		group := peers[managers+p*rf : managers+(p+1)*rf]
		for r := range rf {
			i := managers + p*rf + r
			id := h.add(clients[i], "server-replica", fmt.Sprint(p), fmt.Sprint(r), managerList, port(t, clients[i]), port(t, peers[i]),
				othersOf(group, r), filepath.Join(t.TempDir(), fmt.Sprintf("s%d-%d", p, r)))
			h.servers[p], sids = append(h.servers[p], id), append(sids, id)
		}
	}
	h.start(mids...)
	h.start(sids...)
	awaitClusterState(t, h.managers[0], "ok")
	return h
}

// othersOf returns list without its i-th address, comma-separated, or
// "none".
func othersOf(list []string, i int) string {
	others := slices.Delete(slices.Clone(list), i, i+1)
	if len(others) == 0 {
		return "none"
	}
	return strings.Join(others, ",")
}

// leader returns the replica that leads partition p: the one live replica
// whose ROLE says master, asked until one does (up to 30 s, through an
// election).
func (h *replicatedHarness) leader(p int) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		var masters []int
		for r, i := range h.servers[p] {
			if !h.down(i) && role(ctx, h.addrs[i]) == "master" {
				masters = append(masters, r)
			}
		}
		if len(masters) == 1 {
			return masters[0], nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, fmt.Errorf("no one replica says it leads after 30 s")
}

// follower draws a live replica of partition p other than lead.
func (h *replicatedHarness) follower(rng *rand.Rand, p, lead int) int {
	var live []int
	for r, i := range h.servers[p] {
		if r != lead && !h.down(i) {
			live = append(live, r)
		}
	}
	return live[rng.IntN(len(live))]
}

// role returns the first word of the ROLE of the server at addr, or "" if
// it does not answer within a second.
func role(ctx context.Context, addr string) string {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	v, err := c.Do(ctx, "ROLE").Slice()
	if err != nil || len(v) == 0 {
		return ""
	}
	s, _ := v[0].(string)
	return s
}
