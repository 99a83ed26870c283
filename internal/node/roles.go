package node

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/flintkv/flint/internal/ask"
	"github.com/flintkv/flint/internal/multiraft"
	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/shardmap"
)

// hostRoles answers FLINT.ROLES ALL at a node that hosts several groups
// (server.Hosting): the roles of its members, from its Host.
type hostRoles struct {
	h    *multiraft.Host
	self uint64 // the node's id: its members' id in every group
	mu   sync.Mutex
	// groups are those it hosts a member of, in the order started; the
	// slice is never written in place.
	groups []uint64
}

// host adds group g to those the node hosts a member of.
func (r *hostRoles) host(g uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.groups = append(r.groups[:len(r.groups):len(r.groups)], g)
}

// Process implements server.Hosting.
func (r *hostRoles) Process() string { return server.RunID() }

// Roles implements server.Hosting.
func (r *hostRoles) Roles() []server.MemberRole {
	r.mu.Lock()
	groups := r.groups
	r.mu.Unlock()
	out := make([]server.MemberRole, len(groups))
	for i, g := range groups {
		out[i] = server.MemberRole{Group: g, Member: r.self, Leads: r.h.Leader(g) == r.self}
	}
	return out
}

// pollLeaders keeps v's leaders and the members that are down those that
// the data groups' members say, every poll, until ctx ends. A member that
// does not answer within a second is down; a group's leader is a member
// that says it is a master (the one known before, if two do, as a deposed
// leader may until it learns it is). A group none of whose members says so
// has no leader in v until one does.
func pollLeaders(ctx context.Context, cfg *ShardConfig, v *shardView) {
	p := &rolePoll{pool: ask.NewPool(cfg.Password), via: map[string]string{}}
	defer p.pool.Close()
	for ; ; sleep(ctx, cfg.poll()) {
		if ctx.Err() != nil {
			return
		}
		sh := v.Shards()
		if sh.Map == nil { // until the manager reads a map
			continue
		}
		leaders, down := p.poll(ctx, sh)
		if ctx.Err() == nil && (!maps.Equal(leaders, sh.Leaders) || !maps.Equal(down, sh.Down)) {
			v.setAll(sh.Map, leaders, down)
		}
	}
}

// rolePoll asks each process that serves members once a poll, however
// many members it serves (a node hosting 1,000 groups): FLINT.ROLES ALL at
// one address of each process whose members it has learned, which
// answers for all of them; and FLINT.ROLES at each member whose process it
// does not know (at first, every member; later, one that its process no
// longer lists), which names the process by its run id. A process that
// does not answer has all its members down.
type rolePoll struct {
	pool *ask.Pool
	// via maps the address of a member whose process is known to the
	// address at which that process is asked.
	via map[string]string
}

// roles is a reply to FLINT.ROLES: the process's run id and the roles of
// the members it answered for.
type roles struct {
	run     string
	members []server.MemberRole
}

// poll asks for the roles of the members of sh's map and returns each
// group's leader and the members that did not answer.
func (p *rolePoll) poll(ctx context.Context, sh *server.Shards) (map[uint64]uint64, map[shardmap.MemberKey]bool) {
	addrOf := map[shardmap.MemberKey]string{}
	for _, g := range sh.Map.Groups {
		for _, m := range g.Members {
			addrOf[shardmap.MemberKey{Group: g.ID, Member: m.ID}] = m.Addr
		}
	}
	// The processes known, each once.
	heard := map[shardmap.MemberKey]bool{} // the members that answered: whether they lead
	runs := map[string]string{}            // run id -> the address its process is asked at
	targets := slices.Compact(slices.Sorted(maps.Values(p.via)))
	answers := p.askAll(ctx, targets, "ALL")
	for _, t := range targets {
		if r, ok := answers[t]; ok {
			runs[r.run] = t
			p.tally(t, r, addrOf, heard)
		}
	}
	// The members no process answered for, unless their process is down:
	// each asked for itself, or, at an address that serves several, for
	// them all.
	members := map[string]int{} // by address
	for _, addr := range addrOf {
		members[addr]++
	}
	var one, several []string
	for k, addr := range addrOf {
		if _, ok := heard[k]; ok {
			continue
		}
		if t, ok := p.via[addr]; ok {
			if _, up := answers[t]; !up {
				continue
			}
			delete(p.via, addr) // its process no longer serves it
		}
		if members[addr] > 1 {
			several = append(several, addr)
		} else {
			one = append(one, addr)
		}
	}
	slices.Sort(several)
	several = slices.Compact(several)
	for t, r := range p.askAll(ctx, several, "ALL") {
		if _, known := runs[r.run]; !known {
			runs[r.run] = t
		}
		p.tally(runs[r.run], r, addrOf, heard)
	}
	answers = p.askAll(ctx, one)
	for k, addr := range addrOf {
		r, ok := answers[addr]
		if !ok || len(r.members) != 1 {
			continue
		}
		heard[k] = r.members[0].Leads // the member at addr's, as ROLE's
		if m := r.members[0]; m.Group == k.Group && m.Member == k.Member {
			if _, known := runs[r.run]; !known {
				runs[r.run] = addr
			}
			p.via[addr] = runs[r.run]
		}
	}
	leaders, down := map[uint64]uint64{}, map[shardmap.MemberKey]bool{}
	for _, g := range sh.Map.Groups {
		for _, m := range g.Members {
			k := shardmap.MemberKey{Group: g.ID, Member: m.ID}
			leads, ok := heard[k]
			switch {
			case !ok:
				down[k] = true
			case leads && (leaders[g.ID] == 0 || m.ID == sh.Leaders[g.ID]):
				leaders[g.ID] = m.ID
			}
		}
	}
	return leaders, down
}

// tally takes the roles that the process asked at t answered with for
// all its members: those in the map (addrOf) have answered (heard), and
// their process is asked at t from now on.
func (p *rolePoll) tally(t string, r roles, addrOf map[shardmap.MemberKey]string, heard map[shardmap.MemberKey]bool) {
	for _, m := range r.members {
		k := shardmap.MemberKey{Group: m.Group, Member: m.Member}
		if addr, ok := addrOf[k]; ok {
			heard[k] = m.Leads
			p.via[addr] = t
		}
	}
}

// askAll asks each of addrs FLINT.ROLES with args, at once, and returns
// the replies of those that answered within a second.
func (p *rolePoll) askAll(ctx context.Context, addrs []string, args ...string) map[string]roles {
	got := map[string]roles{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, addr := range addrs {
		wg.Go(func() {
			qctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			v, err := p.pool.One(qctx, addr, append([]string{"FLINT.ROLES"}, args...)...)
			r, ok := parseRoles(v)
			if err != nil || !ok {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			got[addr] = r
		})
	}
	wg.Wait()
	return got
}

// parseRoles parses a reply to FLINT.ROLES (see server.rolesCmd).
func parseRoles(v protocol.Value) (roles, bool) {
	e := v.Elems
	if len(e) == 0 || len(e)%3 != 1 {
		return roles{}, false
	}
	r := roles{run: string(e[0].Str)}
	for e = e[1:]; len(e) >= 3; e = e[3:] {
		r.members = append(r.members, server.MemberRole{Group: uint64(e[0].Int), Member: uint64(e[1].Int), Leads: string(e[2].Str) == "master"})
	}
	return r, true
}
