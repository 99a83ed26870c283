package node

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flintkv/flint/internal/ask"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
	"github.com/flintkv/flint/internal/shardmap"
	"github.com/flintkv/flint/internal/store"
)

// fakeProcess stands for a node that hosts members of several groups, all
// with its id, each served on an address of its own: the servers of its
// members answer FLINT.ROLES from it.
type fakeProcess struct {
	name string
	self uint64
	mu   sync.Mutex
	// leads says, by group, whether its member leads; a group it is not
	// in is absent.
	leads map[uint64]bool
	// alls and briefs count the FLINT.ROLES ALL and FLINT.ROLES asked.
	alls, briefs atomic.Int64
}

func (p *fakeProcess) setLeads(g uint64, leads bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.leads[g] = leads
}

func (p *fakeProcess) leave(g uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.leads, g)
}

// fakeMember is the backend of a fakeProcess's member of group.
type fakeMember struct {
	server.Local
	*shardView
	p     *fakeProcess
	group uint64
}

func (m fakeMember) Process() string { return m.p.name }

func (m fakeMember) Roles() []server.MemberRole {
	m.p.alls.Add(1)
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	var out []server.MemberRole
	for _, g := range slices.Sorted(maps.Keys(m.p.leads)) {
		out = append(out, server.MemberRole{Group: g, Member: m.p.self, Leads: m.p.leads[g]})
	}
	return out
}

func (m fakeMember) Redirect() (string, bool) { return "", false }

func (m fakeMember) ClusterView() server.ClusterView {
	m.p.briefs.Add(1)
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	v := server.ClusterView{Self: m.p.self}
	if m.p.leads[m.group] {
		v.Leader = m.p.self
	}
	return v
}

// TestRolePoll runs the manager's poll of the leaders against three
// "processes" that serve a member of each of two groups, A and B each
// member on an address of its own, C both on one: it asks each member of
// A and B once, and C for all its members, then each process once a poll,
// and follows a leader change, a process that stops answering (all its
// members are down, and they are not asked one by one), and a process
// that stops serving a member (which is then asked itself).
func TestRolePoll(t *testing.T) {
	a := &fakeProcess{name: "A", self: 1, leads: map[uint64]bool{1: true, 2: false}}
	b := &fakeProcess{name: "B", self: 2, leads: map[uint64]bool{1: false, 2: true}}
	c := &fakeProcess{name: "C", self: 3, leads: map[uint64]bool{1: false, 2: false}}
	start := func(p *fakeProcess, g uint64) *servertest.Server {
		return servertest.StartBackend(t, server.Config{},
			fakeMember{server.Local{S: store.New(store.Options{})}, newShardView(g, nil), p, g})
	}
	a1, a2, b1, b2, c12 := start(a, 1), start(a, 2), start(b, 1), start(b, 2), start(c, 1)
	m, err := shardmap.New(1, []shardmap.Group{
		{ID: 1, Slots: []shardmap.Range{{First: 0, Last: 8191}}, Members: []shardmap.Member{{ID: 1, Addr: a1.Addr}, {ID: 2, Addr: b1.Addr}, {ID: 3, Addr: c12.Addr}}},
		{ID: 2, Slots: []shardmap.Range{{First: 8192, Last: 16383}}, Members: []shardmap.Member{{ID: 1, Addr: a2.Addr}, {ID: 2, Addr: b2.Addr}, {ID: 3, Addr: c12.Addr}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &rolePoll{pool: ask.NewPool(""), via: map[string]string{}}
	defer p.pool.Close()
	sh := &server.Shards{Map: m}
	poll := func(step string, leaders map[uint64]uint64, down []shardmap.MemberKey, alls, briefs [3]int64) {
		t.Helper()
		l, d := p.poll(context.Background(), sh)
		if !maps.Equal(l, leaders) || !maps.Equal(d, keySet(down)) {
			t.Errorf("%s: leaders %v, down %v; want %v, %v", step, l, d, leaders, down)
		}
		got := [2][3]int64{{a.alls.Load(), b.alls.Load(), c.alls.Load()}, {a.briefs.Load(), b.briefs.Load(), c.briefs.Load()}}
		if got != [2][3]int64{alls, briefs} {
			t.Errorf("%s: FLINT.ROLES ALL asked of A, B and C %v times so far, FLINT.ROLES %v; want %v, %v", step, got[0], got[1], alls, briefs)
		}
		sh = &server.Shards{Map: m, Leaders: l, Down: d}
	}
	poll("the first poll, of every member", map[uint64]uint64{1: 1, 2: 2}, nil, [3]int64{0, 0, 1}, [3]int64{2, 2, 0})
	poll("the next, of every process", map[uint64]uint64{1: 1, 2: 2}, nil, [3]int64{1, 1, 2}, [3]int64{2, 2, 0})
	a.setLeads(1, false)
	b.setLeads(1, true)
	poll("after a leader change", map[uint64]uint64{1: 2, 2: 2}, nil, [3]int64{2, 2, 3}, [3]int64{2, 2, 0})
	a1.Stop(t)
	a2.Stop(t)
	poll("with A stopped", map[uint64]uint64{1: 2, 2: 2}, []shardmap.MemberKey{{Group: 1, Member: 1}, {Group: 2, Member: 1}},
		[3]int64{2, 3, 4}, [3]int64{2, 2, 0})
	b.leave(2) // b2 still answers for itself, as a slave
	poll("with B no longer listing group 2", map[uint64]uint64{1: 2}, []shardmap.MemberKey{{Group: 1, Member: 1}, {Group: 2, Member: 1}},
		[3]int64{2, 4, 5}, [3]int64{2, 3, 0})
}

func keySet(keys []shardmap.MemberKey) map[shardmap.MemberKey]bool {
	s := map[shardmap.MemberKey]bool{}
	for _, k := range keys {
		s[k] = true
	}
	return s
}
