package client

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/flintkv/flint/internal/protocol"
	keyslot "github.com/flintkv/flint/internal/slot"
)

// exec runs req's commands and returns their replies, error replies
// included (see send).
func (c *Client) exec(ctx context.Context, req request) ([]Value, error) {
	replies, _, resent, err := c.execResent(ctx, req)
	if err == nil && resent {
		err = abortedAfterResend(req, replies)
	}
	return replies, err
}

// abortedAfterResend returns an error wrapping ErrUnknownOutcome if a
// transaction that req holds whole was refused (EXECABORT) in a call that
// sent a write again: the refusal tells only of the last attempt, and an
// earlier one may have applied the transaction.
func abortedAfterResend(req request, replies []Value) error {
	for i, end := range txEnds(req) {
		if end == i && i < len(replies) && replies[i].IsError() && bytes.HasPrefix(replies[i].Str, []byte("EXECABORT")) {
			return fmt.Errorf("%w: the transaction was refused (%s) after an earlier attempt that may have applied it", ErrUnknownOutcome, replies[i].Str)
		}
	}
	return nil
}

// execResent is exec that also reports, as send does, which member gave
// each reply and whether a write was sent again after an attempt that may
// have applied it. at is the zero origin, which names no member, when a
// command was split into parts.
//
// In a sharded map each command is routed by the slot of its first key
// (see slotOf), and some are split into parts that go to different
// members and whose replies are joined (see plan). A request whose slots
// are set already goes as it is.
func (c *Client) execResent(ctx context.Context, req request) (replies []Value, at origin, resent bool, err error) {
	t := c.table.Load()
	if !t.sharded() || req.slots != nil {
		return c.send(ctx, req)
	}
	pl := plan(t, req)
	replies, at, resent, err = c.send(ctx, pl.parts)
	if err != nil || pl.splits == nil {
		return replies, at, resent, err
	}
	out := c.join(pl, replies, at)
	return out, origin{}, resent, c.recheckRanges(ctx, t, pl, at, out)
}

// planned is how a request goes out in a sharded map: its commands as parts,
// each routed by a slot, and how the replies of a command sent as several
// parts make its reply.
//
// A read of several keys (MGET, EXISTS) whose keys are in several slots is
// split into one command per slot, which members serve on their own, and
// its reply is made of theirs: it is then not read at one instant. A write
// of several keys is not split: a member answers it CROSSSLOT, and the
// error is the caller's. Splitting it would make one write several, which
// may each apply or fail, and whose outcome one reply cannot tell.
//
// RANGE goes to the master of every range of the map, since each member
// answers it with the keys its group holds, and the replies are merged in
// key order (see rangeJoin).
type planned struct {
	parts  request    // with slots
	splits []splitCmd // the commands sent as several parts, in order; nil if none is
}

// splitCmd is a command sent as parts[first : first+n] and joined by j.
type splitCmd struct {
	first, n int
	j        joiner
}

// joiner makes a command's reply from the replies of its parts, given the
// member that gave each.
type joiner interface {
	join(c *Client, parts []Value, at []*pool) Value
}

// plan routes req's commands in t's map, splitting those that must be.
func plan(t *table, req request) planned {
	const split = -2 // in slots: the command is split
	n := req.len()
	slots := make([]int, n)
	whole := true
	for i := range n {
		slots[i] = -1
		if a, ok := parseArgs(req.command(i)); ok {
			s, splits := routeOf(a)
			slots[i] = s
			if splits {
				slots[i], whole = split, false
			}
		}
	}
	routeTx(req, slots)
	if whole {
		return planned{parts: request{cmd: req.cmd, ends: req.ends, slots: slots}}
	}
	var pl planned
	pl.parts.ends = []int{}
	for i := range n {
		cmd := req.command(i)
		if slots[i] != split {
			pl.parts.add(cmd, slots[i])
			continue
		}
		a, _ := parseArgs(cmd)
		first := len(pl.parts.ends)
		j := splitInto(t, a, &pl.parts)
		pl.splits = append(pl.splits, splitCmd{first: first, n: len(pl.parts.ends) - first, j: j})
	}
	return pl
}

// routeTx routes each MULTI of req, and the EXEC (in FLINT.SEQ or not) or
// DISCARD that ends it, which have no key, by the slot of the first command between them that
// has one (slots holds each command's), so that the whole transaction goes
// to one member, on one connection. A transaction with no key goes
// anywhere, as it is.
func routeTx(req request, slots []int) {
	multi, s := -1, -1 // the open MULTI, and its slot once known
	for i := range slots {
		switch txName(req.command(i)) {
		case "MULTI":
			multi, s = i, -1
		case "EXEC", "DISCARD":
			if multi >= 0 {
				slots[multi], slots[i], multi = s, s, -1
			}
		default:
			if multi >= 0 && s < 0 && slots[i] >= 0 {
				s = slots[i]
			}
		}
	}
}

// add appends a part routed by slot s.
func (r *request) add(cmd []byte, s int) {
	r.cmd = append(r.cmd, cmd...)
	r.ends = append(r.ends, len(r.cmd))
	r.slots = append(r.slots, s)
}

// routeOf returns the slot the command a is routed by (-1 for none), or
// true if it must be split.
func routeOf(a [][]byte) (int, bool) {
	name := strings.ToUpper(string(a[0]))
	switch {
	case name == "RANGE" && rangeArgs(a):
		return -1, true
	case (name == "MGET" || name == "EXISTS") && len(a) > 2:
		s := keyslot.Of(a[1])
		for _, k := range a[2:] {
			if keyslot.Of(k) != s {
				return -1, true
			}
		}
		return s, false
	}
	return slotOf(a), false
}

// splitInto appends the parts of command a, which routeOf says to split,
// to parts, and returns how to join their replies.
func splitInto(t *table, a [][]byte, parts *request) joiner {
	if strings.EqualFold(string(a[0]), "RANGE") {
		return splitRange(t, a, parts)
	}
	// MGET or EXISTS: one command per slot, in the order the slots come.
	var bySlot []int // the slot of each part
	keyPart := make([]int, len(a)-1)
	for i, k := range a[1:] {
		s := keyslot.Of(k)
		p := 0
		for p < len(bySlot) && bySlot[p] != s {
			p++
		}
		if p == len(bySlot) {
			bySlot = append(bySlot, s)
		}
		keyPart[i] = p
	}
	counts := make([]int, len(bySlot))
	for p, s := range bySlot {
		var keys [][]byte
		for i, k := range a[1:] {
			if keyPart[i] == p {
				keys = append(keys, k)
			}
		}
		counts[p] = len(keys)
		parts.add(protocol.AppendCommand(nil, append([][]byte{a[0]}, keys...)...), s)
	}
	if strings.EqualFold(string(a[0]), "EXISTS") {
		return existsJoin{}
	}
	return mgetJoin{keyPart: keyPart, counts: counts}
}

// join makes the reply of each command of pl's request from its parts'.
func (c *Client) join(pl planned, vals []Value, at origin) []Value {
	n := len(vals)
	for _, sp := range pl.splits {
		n -= sp.n - 1
	}
	out := make([]Value, 0, n)
	next := 0 // the next part not yet taken
	for _, sp := range pl.splits {
		out = append(out, vals[next:sp.first]...)
		ats := make([]*pool, sp.n)
		for i := range ats {
			ats[i] = at.of(sp.first + i)
		}
		out = append(out, sp.j.join(c, vals[sp.first:sp.first+sp.n], ats))
		next = sp.first + sp.n
	}
	return append(out, vals[next:]...)
}

// mgetJoin joins the replies of MGET's parts: keyPart[i] is the part that
// key i went to, counts[p] how many keys part p has.
type mgetJoin struct {
	keyPart, counts []int
}

func (j mgetJoin) join(_ *Client, parts []Value, _ []*pool) Value {
	for p, v := range parts {
		if v.IsError() || v.Kind != KindArray || len(v.Elems) != j.counts[p] {
			return v // an error, or a reply that MGet reports as unexpected
		}
	}
	next := make([]int, len(parts))
	out := Value{Kind: KindArray, Elems: make([]Value, len(j.keyPart))}
	for i, p := range j.keyPart {
		out.Elems[i] = parts[p].Elems[next[p]]
		next[p]++
	}
	return out
}

// existsJoin adds up the counts of EXISTS's parts.
type existsJoin struct{}

func (existsJoin) join(_ *Client, parts []Value, _ []*pool) Value {
	sum := Value{Kind: KindInt}
	for _, v := range parts {
		if v.Kind != KindInt {
			return v
		}
		sum.Int += v.Int
	}
	return sum
}

// parseArgs returns the arguments of a command as the package encodes it:
// an array of bulk strings. The slices point into cmd.
func parseArgs(cmd []byte) ([][]byte, bool) {
	n, rest, ok := header(cmd, '*')
	if !ok || n < 1 {
		return nil, false
	}
	args := make([][]byte, 0, n)
	for range n {
		var l int
		if l, rest, ok = header(rest, '$'); !ok || l+2 > len(rest) {
			return nil, false
		}
		args = append(args, rest[:l])
		rest = rest[l+2:]
	}
	return args, true
}

// header parses "<prefix><n>\r\n" at the start of b and returns n and what
// follows.
func header(b []byte, prefix byte) (int, []byte, bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 2 || b[0] != prefix || b[i-1] != '\r' {
		return 0, nil, false
	}
	n, err := strconv.Atoi(string(b[1 : i-1]))
	if err != nil || n < 0 {
		return 0, nil, false
	}
	return n, b[i+1:], true
}

// keyless names the commands that have no key: they go to any member (the
// target). Any other command is routed by its first argument, which is its
// key for Flint's commands and most of Redis's; BITOP, whose first is the
// operation, by its second.
var keyless = map[string]bool{
	"PING": true, "ECHO": true, "INFO": true, "DBSIZE": true, "FLUSHDB": true, "FLUSHALL": true,
	"SAVE": true, "BGSAVE": true, "LASTSAVE": true, "CLUSTER": true, "ROLE": true, "COMMAND": true,
	"CONFIG": true, "TIME": true, "HELLO": true, "AUTH": true, "SELECT": true, "QUIT": true,
	"CLIENT": true, "READONLY": true, "READWRITE": true, "ASKING": true, "MULTI": true, "EXEC": true,
	"DISCARD": true, "KEYS": true, "SCAN": true, "RANDOMKEY": true, "WAIT": true, "SHUTDOWN": true,
	"FLINT.SESSION": true, "FLINT.MEMBER": true, "FLINT.MAP": true, "FLINT.ROLES": true,
}

// slotOf returns the slot a command is routed by: its first key's, or -1
// if it has none. FLINT.SEQ is routed by the command it wraps.
func slotOf(a [][]byte) int {
	name := strings.ToUpper(string(a[0]))
	if name == "FLINT.SEQ" && len(a) > 4 {
		return slotOf(a[4:])
	}
	if keyless[name] || len(a) < 2 {
		return -1
	}
	if name == "BITOP" && len(a) > 2 {
		return keyslot.Of(a[2])
	}
	return keyslot.Of(a[1])
}

// slotOfCommand is slotOf for an encoded command.
func slotOfCommand(cmd []byte) int {
	a, ok := parseArgs(cmd)
	if !ok {
		return -1
	}
	return slotOf(a)
}
