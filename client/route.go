package client

import (
	"bytes"
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
	// nodes are the range's members as CLUSTER SLOTS named them, its
	// master first, or nil if only a MOVED named addr. A MOVED to one of
	// them is a leader change within the range's group.
	nodes []string
}

// routes maps slot ranges to the members that serve them, as CLUSTER SLOTS
// and MOVED replies tell. It is empty until one of them does.
// Invariant: the ranges are sorted, disjoint, and within [0, numSlots).
//
// A map of one range is one group serving every slot: the Client sends
// every call to its master, as to a single server. A map of several is a
// sharded cluster: each call goes to the master of its key's slot (see
// table).
type routes []slotRange

// lookup returns the member serving slot, if a route names one.
func (r routes) lookup(slot int) (string, bool) {
	if i, ok := r.find(slot); ok {
		return r[i].addr, true
	}
	return "", false
}

// find returns the index of the range holding slot, or, with false, where
// one holding it would go.
func (r routes) find(slot int) (int, bool) {
	return slices.BinarySearchFunc(r, slot, func(sr slotRange, slot int) int {
		switch {
		case sr.last < slot:
			return -1
		case sr.first > slot:
			return 1
		}
		return 0
	})
}

// names reports whether a route names addr.
func (r routes) names(addr string) bool {
	return slices.ContainsFunc(r, func(sr slotRange) bool { return sr.addr == addr })
}

// moved records that addr serves slot. With no range known, the whole key
// space moves (one group serves it all, as far as anything said). In a
// map of one range, that range moves: its group has a new leader. In a map
// of several, the range holding slot moves if addr is one of its nodes or
// its nodes are unknown (a new leader, again), and slot alone moves if
// addr is a node of another group's (the slot moved between groups: the
// rest of the range did not, as far as this reply says; a refresh of the
// map tells the rest). With no range holding slot, slot alone moves.
func (r routes) moved(slot int, addr string) routes {
	if len(r) == 0 {
		return routes{{first: 0, last: numSlots - 1, addr: addr}}
	}
	i, found := r.find(slot)
	switch {
	case !found:
		return slices.Insert(r, i, slotRange{first: slot, last: slot, addr: addr})
	case len(r) == 1 || r[i].nodes == nil || slices.Contains(r[i].nodes, addr):
		r[i].addr = addr
		return r
	}
	sr := r[i]
	split := make(routes, 0, 3)
	if sr.first < slot {
		split = append(split, slotRange{first: sr.first, last: slot - 1, addr: sr.addr, nodes: sr.nodes})
	}
	split = append(split, slotRange{first: slot, last: slot, addr: addr})
	if slot < sr.last {
		split = append(split, slotRange{first: slot + 1, last: sr.last, addr: sr.addr, nodes: sr.nodes})
	}
	return slices.Concat(r[:i], split, r[i+1:])
}

// members returns the nodes of the range holding slot, its master first
// and addr among them, or nil if no range holds it.
func (r routes) members(slot int) []string {
	i, ok := r.find(slot)
	if !ok {
		return nil
	}
	if slices.Contains(r[i].nodes, r[i].addr) {
		return r[i].nodes
	}
	return append([]string{r[i].addr}, r[i].nodes...)
}

// parseRedirect parses "MOVED <slot> <host:port>", the reply of a member
// that does not serve the command's slot, or "ASK <slot> <host:port>",
// that of one whose slot is moving and which does not hold the key: kind
// is MOVED or ASK.
func parseRedirect(msg []byte) (kind string, slot int, addr string, ok bool) {
	f := strings.Fields(string(msg))
	if len(f) != 3 || f[0] != "MOVED" && f[0] != "ASK" {
		return "", 0, "", false
	}
	slot, err := strconv.Atoi(f[1])
	if err != nil || slot < 0 || slot >= numSlots {
		return "", 0, "", false
	}
	if _, _, err := net.SplitHostPort(f[2]); err != nil {
		return "", 0, "", false
	}
	return f[0], slot, f[2], true
}

// parseSlots parses a CLUSTER SLOTS reply from the member at queried: an
// array of [first, last, master, replicas...] whose nodes are
// [host, port, ...], an empty host meaning queried's. It returns the ranges
// with their masters and nodes, every node's address, and false if the
// reply is not that or names no slot.
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
		sr := slotRange{first: first, last: last}
		for _, n := range e.Elems[2:] {
			addr, ok := nodeAddr(n, host)
			if !ok {
				return nil, nil, false
			}
			sr.nodes = append(sr.nodes, addr)
			addrs = append(addrs, addr)
		}
		sr.addr = sr.nodes[0]
		r = append(r, sr)
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

// refusal is how a server turned a command down without running it.
type refusal uint8

const (
	accepted refusal = iota // not turned down: the command ran, or failed on its own account
	movedTo                 // MOVED: another member serves the slot
	askedTo                 // ASK: the slot is moving, and its key is at another member
	busy                    // TRYAGAIN, CLUSTERDOWN, READONLY or LOADING: ask later, or another member
)

// refusalOf classifies an error reply's message. A MOVED or ASK that does
// not parse is not a refusal the client can act on, so it counts as
// accepted. CROSSSLOT is accepted too: sending the command again would
// not change its keys.
func refusalOf(msg []byte) refusal {
	code, _, _ := bytes.Cut(msg, []byte(" "))
	switch string(code) {
	case "MOVED", "ASK":
		if kind, _, _, ok := parseRedirect(msg); ok && kind == "MOVED" {
			return movedTo
		} else if ok {
			return askedTo
		}
	case "TRYAGAIN", "CLUSTERDOWN", "READONLY", "LOADING":
		return busy
	}
	return accepted
}

// String shows the range as first-last@addr, for tests and debugging.
func (sr slotRange) String() string {
	return strconv.Itoa(sr.first) + "-" + strconv.Itoa(sr.last) + "@" + sr.addr
}
