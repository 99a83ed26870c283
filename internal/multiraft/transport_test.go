package multiraft

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/flintkv/flint/internal/transport"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// TestOverTransport runs 3 hosts of 20 groups over the real transport on
// loopback: every group takes writes and every node applies them, and each
// node keeps one messages connection per peer node, which carries every
// group's messages (several to a write, as the log shows).
func TestOverTransport(t *testing.T) {
	const n, groups = 3, 20
	lns := listeners(t, n)
	trs := make([]*transport.Transport, n)
	hosts := make([]*Host, n)
	lists := make([]map[uint64]*list, n)
	for i := range n {
		trs[i], hosts[i], lists[i] = startOverTransport(t, i, lns, groups, Config{TickInterval: 10 * time.Millisecond})
	}
	for g := uint64(1); g <= groups; g++ {
		if err := hosts[g%n].Campaign(g); err != nil {
			t.Fatal(err)
		}
	}
	c := &cluster{t: t}
	var want []string
	for k := range 5 {
		want = append(want, string(rune('a'+k)))
	}
	for g := uint64(1); g <= groups; g++ {
		for _, v := range want {
			if by, _ := c.write(g, v, func() []*Host { return hosts }); by == nil {
				t.Fatalf("group %d: the write of %q was not acknowledged", g, v)
			}
		}
	}
	waitFor(t, "every node applied every write", func() bool {
		for i := range n {
			for g := uint64(1); g <= groups; g++ {
				if !slices.Equal(lists[i][g].snapshot(), want) {
					return false
				}
			}
		}
		return true
	})
	for i, tr := range trs {
		st := tr.Stats()
		if len(st) != n-1 {
			t.Fatalf("node %d has %d peers, want %d", i+1, len(st), n-1)
		}
		for _, p := range st {
			if !p.Connected || p.Sent == 0 {
				t.Fatalf("node %d to node %d: %+v: want one connection, carrying the groups' messages", i+1, p.Node, p)
			}
			t.Logf("node %d to node %d: %d messages of %d groups in %d writes", i+1, p.Node, p.Sent, groups, p.Writes)
		}
	}
}

// listeners returns n listeners on loopback, node i+1's at i.
func listeners(t *testing.T, n int) []net.Listener {
	lns := make([]net.Listener, n)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
	}
	return lns
}

// startOverTransport starts node i+1 of len(lns), on lns[i], with groups
// 1 to groups, each a list, which snapshots if cfg.SnapshotEntries is set
// (the host then has a SnapDir).
func startOverTransport(t *testing.T, i int, lns []net.Listener, groups uint64, cfg Config) (*transport.Transport, *Host, map[uint64]*list) {
	var members []uint64
	for j := range lns {
		members = append(members, uint64(j+1))
	}
	var r router
	tr, err := transport.New(transport.Config{NodeID: uint64(i + 1), ClusterID: 7, Secret: []byte("0123456789abcdef0123456789abcdef"), Listener: lns[i], Handler: &r})
	if err != nil {
		t.Fatal(err)
	}
	for j, ln := range lns {
		if j != i {
			tr.SetPeer(uint64(j+1), ln.Addr().String())
		}
	}
	fs := vfs.NewMem()
	log, err := wal.OpenShared(fs, "wal", wal.Options{Logger: quiet, SegmentSize: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Node, cfg.Log, cfg.Sender, cfg.Logger = uint64(i+1), log, tr, quiet
	if cfg.SnapshotEntries != 0 {
		cfg.FS, cfg.SnapDir = fs, "snap"
	}
	h := New(cfg)
	lists := map[uint64]*list{}
	for g := uint64(1); g <= groups; g++ {
		lists[g] = &list{}
		if err := h.AddGroup(g, members, lists[g]); err != nil {
			t.Fatal(err)
		}
	}
	r.h.Store(h)
	t.Cleanup(func() {
		h.Stop()
		tr.Close()
		log.Close()
	})
	return tr, h, lists
}

// TestSnapshotOverTransport: a node that starts after the two others took
// writes and compacted their logs catches up by the snapshots that the
// transport streams to it.
func TestSnapshotOverTransport(t *testing.T) {
	const groups = 4
	lns := listeners(t, 3)
	cfg := Config{TickInterval: 10 * time.Millisecond, SnapshotEntries: 5}
	var hosts []*Host
	var lists []map[uint64]*list
	for i := range 2 {
		_, h, l := startOverTransport(t, i, lns, groups, cfg)
		hosts, lists = append(hosts, h), append(lists, l)
	}
	c := &cluster{t: t}
	hists := map[uint64]*history{}
	for g := uint64(1); g <= groups; g++ {
		hists[g] = &history{}
		for _, v := range valuesFrom("v", 20) {
			switch by, maybe := c.write(g, v, func() []*Host { return hosts }); {
			case by != nil:
				hists[g].acked = append(hists[g].acked, v)
			case maybe:
				hists[g].maybe = append(hists[g].maybe, v)
			}
		}
	}
	waitFor(t, "the logs compacted", func() bool {
		for g := uint64(1); g <= groups; g++ {
			for _, h := range hosts {
				if first, _ := h.group(g).storage.FirstIndex(); first <= 1 {
					return false
				}
			}
		}
		return true
	})
	_, late, lateLists := startOverTransport(t, 2, lns, groups, cfg)
	waitFor(t, "the late node applied what the others did", func() bool {
		for g := uint64(1); g <= groups; g++ {
			if v := lateLists[g].snapshot(); len(v) == 0 || !slices.Equal(v, lists[0][g].snapshot()) || !slices.Equal(v, lists[1][g].snapshot()) {
				return false
			}
		}
		return true
	})
	for g := uint64(1); g <= groups; g++ {
		final := lateLists[g].snapshot()
		checkValues(t, g, final, hists[g].acked, hists[g].maybe)
		if n := lateLists[g].appliedSince(); n >= len(final) {
			t.Fatalf("group %d: the late node applied all %d entries: it was sent no snapshot", g, n)
		}
	}
	if late.Err() != nil {
		t.Fatal(late.Err())
	}
}
