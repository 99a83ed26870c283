package check

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/flintkv/flint/internal/shardmap"
	"github.com/flintkv/flint/internal/slot"
)

// maxGroup is the most keys in a group. Multi-key commands stay inside one
// group, and a group that they touch is checked as one state, so groups are
// kept small enough for the search.
const maxGroup = 8

// group is a set of keys that multi-key commands may touch together, and
// the counter that INCR uses next to them.
//
// Invariant: keys are sorted, and lo < every key < hi, with no key of any
// other group or counter between lo and hi.
//
// Invariant, in a sharded run: the keys and the counter share one hash
// tag, so one slot, owned by data group shard (from 0).
type group struct {
	keys    []string
	counter string
	lo, hi  string // RANGE bounds just outside the group's keys
	shard   int
}

// layout names the keys of a run. Every key starts with a prefix unique to
// the run, so that a server holding other data does not disturb the check.
//
// A group's keys are P+"g<i>/k<j>" (shared, in conflict mode) or
// P+"c<client>/g<i>/k<j>" (one client's own), and its counter is the same
// with "n" for "k<j>", which sorts after every "k<j>" and so stays outside
// every RANGE of the group.
//
// In a sharded run (shards > 0 data groups) the group's part of the name
// has a hash tag, "g<i>{<t>}/", the same for its keys and counter: so
// MSET, MGET and DEL of several keys of a group are in one slot, which
// the servers take in one command (keys of several slots they would refuse
// with CROSSSLOT, and the client would split an MGET), and a RANGE, which
// never leaves a group, finds keys in one data group only, which answers
// it at one instant: the model takes every multi-key command as atomic.
// The tags are chosen so that the groups spread over the data groups.
type layout struct {
	// groups[c] are the groups client c uses: the same ones for every
	// client in conflict mode, its own otherwise.
	groups [][]group
}

// newLayout spreads keys (per client, or shared in conflict mode) over as
// few groups as maxGroup allows, as evenly as possible. With shards data
// groups, it makes at least min(keys, shards) groups of each key set, and
// puts group j of client c in data group (c+j) mod shards (of the shared
// set, j mod shards), so that every data group gets keys of every client
// that has enough of them.
func newLayout(prefix string, clients, keys int, conflict bool, shards int) layout {
	var l layout
	tags := newTagger(shards)
	var shared []group
	if conflict {
		shared = makeGroups(prefix, keys, 0, tags)
	}
	for c := range clients {
		if conflict {
			l.groups = append(l.groups, shared)
		} else {
			l.groups = append(l.groups, makeGroups(fmt.Sprintf("%sc%d/", prefix, c), keys, c, tags))
		}
	}
	return l
}

// makeGroups splits keys into groups named after prefix, the first in
// data group first (mod the shards), the next in the next, and so on.
func makeGroups(prefix string, keys, first int, tags *tagger) []group {
	n := (keys + maxGroup - 1) / maxGroup
	if tags != nil {
		n = max(n, min(keys, tags.shards))
	}
	gs := make([]group, n)
	for i := range gs {
		g := &gs[i]
		base := fmt.Sprintf("%sg%d/", prefix, i)
		if tags != nil {
			g.shard = (first + i) % tags.shards
			base = fmt.Sprintf("%sg%d{%s}/", prefix, i, tags.next(g.shard))
		}
		size := keys / n
		if i < keys%n {
			size++
		}
		for j := range size {
			g.keys = append(g.keys, fmt.Sprintf("%sk%d", base, j))
		}
		g.counter, g.lo, g.hi = base+"n", base+"k", base+"k~"
	}
	return gs
}

// tagger hands out hash tags, each a number, the next one whose slot the
// wanted data group owns: distinct tags, so that groups mostly get slots of
// their own.
type tagger struct {
	shards int
	m      *shardmap.Map // only its slots
	n      int           // the last tag handed out
}

// newTagger returns the tagger of a sharded run with shards data groups,
// or nil for a run that is not sharded. The slots are split as the
// manager splits them (`flint serve --manager --servers`: shardmap.Even).
func newTagger(shards int) *tagger {
	if shards == 0 {
		return nil
	}
	members := make([][]shardmap.Member, shards)
	for i := range members {
		members[i] = []shardmap.Member{{ID: 1, Addr: "127.0.0.1:1"}} // the slots do not depend on them
	}
	m, err := shardmap.Even(members)
	if err != nil {
		panic(fmt.Sprintf("check: splitting the slots among %d groups: %v", shards, err)) // Config checks shards
	}
	return &tagger{shards: shards, m: m}
}

// next returns the next tag whose slot data group shard (from 0) owns.
func (t *tagger) next(shard int) string {
	for {
		t.n++
		tag := strconv.Itoa(t.n)
		if t.m.Owner(slot.Of([]byte(tag))).ID == uint64(shard+1) {
			return tag
		}
	}
}

// slots returns the slots of the layout's keys, sorted, each once.
func (l layout) slots() []int {
	var out []int
	for _, k := range l.universe() {
		out = append(out, slot.Of([]byte(k)))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// universe returns every key of the layout, sorted, each once.
func (l layout) universe() []string {
	var keys []string
	for _, gs := range l.groups {
		for _, g := range gs {
			keys = append(keys, g.keys...)
			keys = append(keys, g.counter)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}
