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
	secret := []byte("0123456789abcdef0123456789abcdef")
	var members []uint64
	lns := make([]net.Listener, n)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		members = append(members, uint64(i+1))
	}
	trs := make([]*transport.Transport, n)
	hosts := make([]*Host, n)
	lists := make([]map[uint64]*list, n)
	for i := range n {
		var r router
		tr, err := transport.New(transport.Config{NodeID: uint64(i + 1), ClusterID: 7, Secret: secret, Listener: lns[i], Handler: &r})
		if err != nil {
			t.Fatal(err)
		}
		for j, ln := range lns {
			if j != i {
				tr.SetPeer(uint64(j+1), ln.Addr().String())
			}
		}
		fs := vfs.NewMem()
		log, err := wal.OpenShared(fs, "wal", wal.Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		h := New(Config{Node: uint64(i + 1), Log: log, Sender: tr, FS: fs, SnapDir: "snap", TickInterval: 10 * time.Millisecond, Logger: quiet})
		lists[i] = map[uint64]*list{}
		for g := uint64(1); g <= groups; g++ {
			lists[i][g] = &list{}
			if err := h.AddGroup(g, members, lists[i][g]); err != nil {
				t.Fatal(err)
			}
		}
		r.h.Store(h)
		trs[i], hosts[i] = tr, h
		t.Cleanup(func() {
			h.Stop()
			tr.Close()
			log.Close()
		})
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
