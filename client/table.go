package client

import (
	"slices"
)

// table is the routes as calls read them, without the Client's lock: a
// snapshot, never changed once stored, replaced whenever the routes
// change.
type table struct {
	ranges routes  // a copy of the routes
	pools  []*pool // pools[i] is the pool of ranges[i].addr
	// index[s] is the index in ranges of the range holding slot s, or -1.
	// It is nil unless the map is sharded (has more than one range):
	// then every call goes to the Client's target.
	index []int16
}

// sharded reports whether calls are routed by their keys' slots.
func (t *table) sharded() bool { return t.index != nil }

// rangeOf returns the index of the range holding slot s, or -1 if no range
// does, the map is not sharded, or s is -1 (no key).
func (t *table) rangeOf(s int) int {
	if t.index == nil || s < 0 {
		return -1
	}
	return int(t.index[s])
}

// newTableLocked builds the table of the Client's routes.
func (c *Client) newTableLocked() *table {
	r := c.mu.routes
	t := &table{ranges: slices.Clone(r), pools: make([]*pool, len(r))}
	for i, sr := range r {
		t.pools[i] = c.poolLocked(sr.addr)
	}
	if len(r) > 1 {
		t.index = make([]int16, numSlots)
		for s := range t.index {
			t.index[s] = -1
		}
		for i, sr := range r {
			for s := sr.first; s <= sr.last; s++ {
				t.index[s] = int16(i)
			}
		}
	}
	return t
}

// owner returns the pool a command routed by slot s goes to: the master of
// the range holding s in a sharded map, else the target.
func (c *Client) owner(s int) *pool {
	t := c.table.Load()
	if i := t.rangeOf(s); i >= 0 {
		return t.pools[i]
	}
	return c.target.Load()
}

// setRoutesLocked makes r the routes, with the table and target that
// follow from them.
func (c *Client) setRoutesLocked(r routes) {
	c.mu.routes = r
	c.table.Store(c.newTableLocked())
	if addr, ok := r.lookup(0); ok {
		c.target.Store(c.poolLocked(addr))
	}
}

// learn makes the routes and members that a CLUSTER SLOTS reply named the
// Client's, unless the reply is of a map older than one the Client learned
// (epoch, from askMap; 0 if unknown, which is taken): a member whose map
// lags must not take the Client back to it. A map of the same epoch is
// taken, for the leaders it names, which change within an epoch. It
// reports whether it took them.
func (c *Client) learn(r routes, addrs []string, epoch uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != 0 && epoch < c.mu.epoch {
		return false
	}
	c.mu.epoch = max(c.mu.epoch, epoch)
	for _, a := range addrs {
		c.poolLocked(a)
	}
	c.setRoutesLocked(r)
	return true
}

// moved records a MOVED reply: addr serves slot (see routes.moved). It
// returns addr's pool, and asks for the map to be refreshed: a MOVED may
// be the first sign of a slot move or of a map with more groups.
func (c *Client) moved(slot int, addr string) *pool {
	c.mu.Lock()
	c.setRoutesLocked(c.mu.routes.moved(slot, addr))
	p := c.poolLocked(addr)
	c.mu.Unlock()
	c.refresh()
	return p
}

// promote records that p's member answered a call routed by slot (-1 for a
// command without keys) that the slot's owner could not take, so that
// later calls go to it first.
func (c *Client) promote(p *pool, slot int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.poolLocked(p.addr) // p may have been forgotten meanwhile
	c.setRoutesLocked(c.mu.routes.moved(max(slot, 0), p.addr))
}

// poolOf returns addr's pool, for an ASK, which changes no route.
func (c *Client) poolOf(addr string) *pool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.poolLocked(addr)
}

// after returns the member to try after p for a command routed by slot, so
// that retries visit every candidate in turn: in a sharded map, the nodes
// of the range holding slot, round them; otherwise every member, round
// the list.
func (c *Client) after(p *pool, slot int) *pool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.table.Load().rangeOf(slot) >= 0 {
		if nodes := c.mu.routes.members(slot); len(nodes) > 0 {
			i := slices.Index(nodes, p.addr) // -1 for another: start again at the master
			return c.poolLocked(nodes[(i+1)%len(nodes)])
		}
	}
	m := c.mu.members
	i := slices.Index(m, p) // -1 for a forgotten member: start again at the first
	return m[(i+1)%len(m)]
}

// poolLocked returns addr's pool, making addr a member if it is not one,
// and forgetting another if the Client then knows too many.
func (c *Client) poolLocked(addr string) *pool {
	if p, ok := c.mu.byAddr[addr]; ok {
		return p
	}
	p := c.addLocked(addr)
	if len(c.mu.members)-c.mu.seeds > maxLearned {
		c.forgetLocked()
	}
	return p
}

// addLocked makes addr, which is not one, the newest member.
func (c *Client) addLocked(addr string) *pool {
	p := newPool(c, addr)
	c.mu.byAddr[addr] = p
	c.mu.members = append(c.mu.members, p)
	return p
}

// forgetLocked drops the member learned longest ago that no route names,
// and closes its connections.
func (c *Client) forgetLocked() {
	learned := c.mu.members[c.mu.seeds:]
	i := slices.IndexFunc(learned, func(p *pool) bool { return !c.mu.routes.names(p.addr) })
	if i < 0 {
		return // every learned member serves a range: keep them all
	}
	p := learned[i]
	c.mu.members = slices.Delete(c.mu.members, c.mu.seeds+i, c.mu.seeds+i+1)
	delete(c.mu.byAddr, p.addr)
	p.forget()
}
