package client

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flintkv/flint/internal/backoff"
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
	j := rangeJoin{cmd: cmd}
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
	cmd     []byte // the RANGE, as each part sends it
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

// recheckRanges makes each RANGE of out, the replies of pl planned in t's
// map and answered by at, complete: one whose masters' maps no longer
// match t's is run again (see rangeAgain). A RANGE planned in a stale map
// leaves out a group the map does not name yet, such as a new group of a
// split that the Client reached only through ASK, and whose members'
// maps now name it.
func (c *Client) recheckRanges(ctx context.Context, t *table, pl planned, at origin, out []Value) error {
	shift := 0 // how many more parts than replies the splits before have
	for _, sp := range pl.splits {
		i := sp.first - shift
		shift += sp.n - 1
		j, ok := sp.j.(rangeJoin)
		if !ok || out[i].IsError() {
			continue
		}
		same, err := c.mapsMatch(ctx, t, at, sp)
		if err != nil {
			return err
		}
		if !same {
			if out[i], err = c.rangeAgain(ctx, j.cmd); err != nil {
				return err
			}
		}
	}
	return nil
}

// rangeAgain runs the RANGE cmd in the Client's current map until its
// masters' maps, asked once every part has answered, match the one it was
// planned in, or until ctx is done. It waits before each try, from
// refreshInterval on, doubling up to a second: the members learn the map
// every 250 ms.
func (c *Client) rangeAgain(ctx context.Context, cmd []byte) (Value, error) {
	wait := backoff.New(refreshInterval, time.Second)
	for {
		if err := wait.Wait(ctx); err != nil {
			return Value{}, err
		}
		t := c.table.Load()
		pl := plan(t, request{cmd: cmd})
		replies, at, _, err := c.send(ctx, pl.parts)
		if err != nil {
			return Value{}, err
		}
		v := c.join(pl, replies, at)[0]
		if v.IsError() || pl.splits == nil {
			return v, nil
		}
		if same, err := c.mapsMatch(ctx, t, at, pl.splits[0]); err != nil || same {
			return v, err
		}
	}
}

// mapsMatch asks each member that answered a part of sp for its map
// (askMap) and reports whether all of them route the slots as t does. One
// that does not has its map learned, unless the Client holds a later one.
//
// Why this makes a RANGE complete (see docs/SHARDING.md, "RANGE during
// a move"): a member answers RANGE only while it holds every key of the
// slots its own map gives it, and its map only moves forward; so if, after
// it answered, its map is t's, the slots t gives it were all in its reply.
func (c *Client) mapsMatch(ctx context.Context, t *table, at origin, sp splitCmd) (bool, error) {
	var asked []*pool
	for i := sp.first; i < sp.first+sp.n; i++ {
		p := at.of(i)
		if p == nil || slices.Contains(asked, p) {
			continue
		}
		asked = append(asked, p)
		r, addrs, epoch, ok, err := askMap(ctx, p)
		if err != nil {
			return false, err
		}
		if ok && !sameRoutes(r, t.ranges) {
			c.learn(r, addrs, epoch)
			return false, nil
		}
	}
	return true, nil
}

// sameRoutes reports whether a and b give the same slots to the same
// masters.
func sameRoutes(a, b routes) bool {
	return slices.EqualFunc(a, b, func(x, y slotRange) bool {
		return x.first == y.first && x.last == y.last && x.addr == y.addr
	})
}
