package client

import (
	"bytes"
	"slices"
	"strconv"
	"strings"

	"github.com/flintkv/flint/internal/protocol"
	keyslot "github.com/flintkv/flint/internal/slot"
)

// rangeArgs reports whether a is RANGE start end [LIMIT n] with n a
// non-negative integer: one the client can fan out. Another goes as it is,
// for its member to refuse.
func rangeArgs(a [][]byte) bool {
	switch len(a) {
	case 3:
		return true
	case 5:
		n, err := strconv.Atoi(string(a[4]))
		return strings.EqualFold(string(a[3]), "LIMIT") && err == nil && n >= 0
	}
	return false
}

// splitRange appends one part per master of t's map to parts, each the
// RANGE a, routed by the first slot the master serves, so that it follows
// that range's group through a failover. Each member answers RANGE with
// the keys of its own group.
func splitRange(t *table, a [][]byte, parts *request) joiner {
	cmd := protocol.AppendCommand(nil, a...)
	var masters []*pool
	for i, p := range t.pools {
		if !slices.Contains(masters, p) {
			masters = append(masters, p)
			parts.add(cmd, t.ranges[i].first)
		}
	}
	j := rangeJoin{}
	if len(a) == 5 {
		j.limit, _ = strconv.Atoi(string(a[4]))
		j.limited = true
	}
	return j
}

// rangeJoin merges the replies of a RANGE's parts into one, in key order,
// and applies its limit to the merge.
//
// Each part's reply holds its group's first keys from start on, at most
// limit of them, so their merge holds the first limit keys of all: a key
// among those has fewer than limit keys before it in its own group too. A
// key that two groups hold (while a slot moves between them) is taken
// once, from the member the map names for its slot if that one gave it.
type rangeJoin struct {
	limit   int
	limited bool
}

// pair is one key and its value from a RANGE reply, and the part that
// gave it.
type pair struct {
	key, val Value
	part     int
}

func (j rangeJoin) join(c *Client, parts []Value, at []*pool) Value {
	var pairs []pair
	for p, v := range parts {
		if v.Kind != KindArray || len(v.Elems)%2 != 0 {
			return v // an error, or a reply that Range reports as unexpected
		}
		for i := 0; i < len(v.Elems); i += 2 {
			pairs = append(pairs, pair{key: v.Elems[i], val: v.Elems[i+1], part: p})
		}
	}
	slices.SortStableFunc(pairs, func(a, b pair) int { return bytes.Compare(a.key.Str, b.key.Str) })
	pairs = dedup(c, pairs, at)
	if j.limited && len(pairs) > j.limit {
		pairs = pairs[:j.limit]
	}
	out := Value{Kind: KindArray, Elems: make([]Value, 0, 2*len(pairs))}
	for _, p := range pairs {
		out.Elems = append(out.Elems, p.key, p.val)
	}
	return out
}

// dedup keeps one of each run of pairs with the same key, sorted: the one
// from the member that the map names for the key's slot, or else the
// first. It filters in place.
func dedup(c *Client, pairs []pair, at []*pool) []pair {
	out := pairs[:0]
	for i := 0; i < len(pairs); {
		k := i + 1
		for k < len(pairs) && bytes.Equal(pairs[k].key.Str, pairs[i].key.Str) {
			k++
		}
		best := pairs[i]
		if k > i+1 {
			owner := c.owner(keyslot.Of(best.key.Str))
			for _, p := range pairs[i:k] {
				if at[p.part] == owner {
					best = p
					break
				}
			}
		}
		out = append(out, best)
		i = k
	}
	return out
}
