package client

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
)

// numSlots is how many hash slots the key space is cut into, as in Redis
// Cluster.
const numSlots = 16384

// maxLearned bounds how many addresses a Client remembers besides its
// seeds, so that servers naming ever new addresses cannot grow it without
// end. Beyond it, the address learned longest ago that no route names is
// forgotten.
const maxLearned = 64

// slotRange is the slots first..last, both included, served by addr.
type slotRange struct {
	first, last int
	addr        string
}

// routes maps slot ranges to the members that serve them, as CLUSTER SLOTS
// and MOVED replies tell. It is empty until one of them does.
// Invariant: the ranges are sorted, disjoint, and within [0, numSlots).
//
// Commands are not yet routed by their keys' slots: every call goes to the
// member serving slot 0, which, while a cluster has one group, serves all
// slots. A MOVED for another range is followed for its call alone.
type routes []slotRange

// lookup returns the member serving slot, if a route names one.
func (r routes) lookup(slot int) (string, bool) {
	for _, sr := range r {
		if sr.first <= slot && slot <= sr.last {
			return sr.addr, true
		}
	}
	return "", false
}

// names reports whether a route names addr.
func (r routes) names(addr string) bool {
	return slices.ContainsFunc(r, func(sr slotRange) bool { return sr.addr == addr })
}

// moved records that addr serves slot: the range holding slot moves to
// addr; with no range known, the whole key space does (one group serves
// it all, as far as anything said); with ranges known but none holding
// slot, slot alone does.
func (r routes) moved(slot int, addr string) routes {
	if len(r) == 0 {
		return routes{{0, numSlots - 1, addr}}
	}
	i, found := slices.BinarySearchFunc(r, slot, func(sr slotRange, slot int) int {
		switch {
		case sr.last < slot:
			return -1
		case sr.first > slot:
			return 1
		}
		return 0
	})
	if found {
		r[i].addr = addr
		return r
	}
	return slices.Insert(r, i, slotRange{slot, slot, addr})
}

// parseMoved parses "MOVED <slot> <host:port>", the reply of a member that
// does not serve the command's slot.
func parseMoved(msg []byte) (slot int, addr string, ok bool) {
	f := strings.Fields(string(msg))
	if len(f) != 3 || f[0] != "MOVED" {
		return 0, "", false
	}
	slot, err := strconv.Atoi(f[1])
	if err != nil || slot < 0 || slot >= numSlots {
		return 0, "", false
	}
	if _, _, err := net.SplitHostPort(f[2]); err != nil {
		return 0, "", false
	}
	return slot, f[2], true
}

// parseSlots parses a CLUSTER SLOTS reply from the member at queried: an
// array of [first, last, master, replicas...] whose nodes are
// [host, port, ...], an empty host meaning queried's. It returns the ranges
// with their masters, every node's address, and false if the reply is not
// that or names no slot.
func parseSlots(v Value, queried string) (routes, []string, bool) {
	if v.Kind != KindArray || len(v.Elems) == 0 {
		return nil, nil, false
	}
	host, _, _ := net.SplitHostPort(queried)
	var r routes
	var addrs []string
	for _, e := range v.Elems {
		if e.Kind != KindArray || len(e.Elems) < 3 || e.Elems[0].Kind != KindInt || e.Elems[1].Kind != KindInt {
			return nil, nil, false
		}
		first, last := int(e.Elems[0].Int), int(e.Elems[1].Int)
		if first < 0 || first > last || last >= numSlots {
			return nil, nil, false
		}
		for i, n := range e.Elems[2:] {
			addr, ok := nodeAddr(n, host)
			if !ok {
				return nil, nil, false
			}
			if i == 0 {
				r = append(r, slotRange{first, last, addr})
			}
			addrs = append(addrs, addr)
		}
	}
	slices.SortFunc(r, func(a, b slotRange) int { return a.first - b.first })
	for i := 1; i < len(r); i++ {
		if r[i].first <= r[i-1].last {
			return nil, nil, false
		}
	}
	return r, addrs, true
}

// nodeAddr returns the host:port of a CLUSTER SLOTS node, [host, port, ...].
func nodeAddr(n Value, defaultHost string) (string, bool) {
	if n.Kind != KindArray || len(n.Elems) < 2 || n.Elems[1].Kind != KindInt {
		return "", false
	}
	host := n.Elems[0]
	if host.Kind != KindBulk && host.Kind != KindSimple {
		return "", false
	}
	h := string(host.Str)
	if h == "" {
		h = defaultHost
	}
	return net.JoinHostPort(h, strconv.FormatInt(n.Elems[1].Int, 10)), true
}

// discover asks p's member for CLUSTER SLOTS and learns the routes and
// members it names. A server without the command, or any other failure,
// leaves the routes empty: calls then go to p and, if it fails, to the
// other seeds.
func (c *Client) discover(p *pool) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.dialTimeout)
	defer cancel()
	replies, err := p.send(ctx, appendArgs(nil, "CLUSTER", "SLOTS"), 1)
	if err != nil {
		return
	}
	r, addrs, ok := parseSlots(replies[0], p.addr)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.routes = r
	for _, a := range addrs {
		c.poolLocked(a)
	}
	c.retargetLocked()
}

// moved records a MOVED reply: addr serves slot. It returns addr's pool.
func (c *Client) moved(slot int, addr string) *pool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.routes = c.mu.routes.moved(slot, addr)
	p := c.poolLocked(addr)
	c.retargetLocked()
	return p
}

// promote records that p's member answered a call that the target could
// not take, so that later calls go to it first.
func (c *Client) promote(p *pool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.routes = c.mu.routes.moved(0, p.addr)
	c.poolLocked(p.addr) // p may have been forgotten meanwhile
	c.retargetLocked()
}

// retargetLocked points target at the member serving slot 0, if a route
// names one.
func (c *Client) retargetLocked() {
	if addr, ok := c.mu.routes.lookup(0); ok {
		c.target.Store(c.poolLocked(addr))
	}
}

// after returns the member after p in the member list, round it, so that
// retries visit every member in turn.
func (c *Client) after(p *pool) *pool {
	c.mu.Lock()
	defer c.mu.Unlock()
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

// refusal is how a server turned a command down without running it.
type refusal uint8

const (
	accepted refusal = iota // not turned down: the command ran, or failed on its own account
	movedTo                 // MOVED: another member serves the slot
	busy                    // TRYAGAIN, CLUSTERDOWN, READONLY or LOADING: ask later, or another member
)

// refusalOf classifies an error reply's message. A MOVED that does not
// parse is not a refusal the client can act on, so it counts as accepted.
func refusalOf(msg []byte) refusal {
	code, _, _ := bytes.Cut(msg, []byte(" "))
	switch string(code) {
	case "MOVED":
		if _, _, ok := parseMoved(msg); ok {
			return movedTo
		}
	case "TRYAGAIN", "CLUSTERDOWN", "READONLY", "LOADING":
		return busy
	}
	return accepted
}
