package server

import (
	"strings"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/store"
)

// keyCommands read and write keys.
var keyCommands = []*command{
	{name: "get", arity: 2, flags: "readonly fast", first: 1, last: 1, step: 1, reply: replyGet, readsValues: true},
	{name: "mget", arity: -2, flags: "readonly fast", first: 1, last: -1, step: 1, reply: replyMGet, readsValues: true},
	{name: "exists", arity: -2, flags: "readonly fast", first: 1, last: -1, step: 1, reply: replyExists},
	{name: "touch", arity: -2, flags: "readonly fast", first: 1, last: -1, step: 1, reply: replyExists},
	{name: "type", arity: 2, flags: "readonly fast", first: 1, last: 1, step: 1, reply: replyType},
	{name: "strlen", arity: 2, flags: "readonly fast", first: 1, last: 1, step: 1, reply: replyStrlen},
	{name: "range", arity: -3, flags: "readonly", first: 1, last: 2, step: 1, run: (*conn).rangeCmd, perGroup: true},
	{name: "set", arity: -3, flags: "write denyoom", first: 1, last: 1, step: 1, run: (*conn).set},
	{name: "setnx", arity: 3, flags: "write denyoom fast", first: 1, last: 1, step: 1, run: (*conn).setnx},
	{name: "getset", arity: 3, flags: "write denyoom fast", first: 1, last: 1, step: 1, run: (*conn).swap},
	{name: "swap", arity: 3, flags: "write denyoom fast", first: 1, last: 1, step: 1, run: (*conn).swap},
	{name: "cas", arity: 4, flags: "write denyoom fast", first: 1, last: 1, step: 1, run: (*conn).cas},
	{name: "mset", arity: -3, flags: "write denyoom", first: 1, last: -1, step: 2, run: (*conn).mset},
	{name: "msetnx", arity: -3, flags: "write denyoom", first: 1, last: -1, step: 2, run: (*conn).msetnx},
	{name: "del", arity: -2, flags: "write", first: 1, last: -1, step: 1, run: (*conn).del},
	{name: "unlink", arity: -2, flags: "write fast", first: 1, last: -1, step: 1, run: (*conn).del},
	{name: "incr", arity: 2, flags: "write denyoom fast", first: 1, last: 1, step: 1, run: (*conn).incr},
	{name: "decr", arity: 2, flags: "write denyoom fast", first: 1, last: 1, step: 1, run: (*conn).decr},
	{name: "incrby", arity: 3, flags: "write denyoom fast", first: 1, last: 1, step: 1, run: (*conn).incrby},
	{name: "decrby", arity: 3, flags: "write denyoom fast", first: 1, last: 1, step: 1, run: (*conn).decrby},
	{name: "append", arity: 3, flags: "write denyoom fast", first: 1, last: 1, step: 1, run: (*conn).append},
}

// The simple reads reply from what their keys were found to hold (see
// look), so that they can be deferred among a batch's writes (commit.go).

func replyGet(c *conn, got []lookup) { c.hitValue(got[0]) }

func replyMGet(c *conn, got []lookup) {
	c.out = protocol.AppendArray(c.out, len(got))
	for _, l := range got {
		c.hitValue(l)
	}
}

// replyType replies to TYPE: every value is a string.
func replyType(c *conn, got []lookup) {
	if got[0].found {
		c.out = protocol.AppendSimple(c.out, "string")
		return
	}
	c.out = protocol.AppendSimple(c.out, "none")
}

// replyExists replies to EXISTS, and to TOUCH, which counts the same keys
// (Flint keeps no access times for it to update).
func replyExists(c *conn, got []lookup) {
	var n int64
	for _, l := range got {
		if l.found {
			n++
		}
	}
	c.int(n)
}

func replyStrlen(c *conn, got []lookup) { c.int(int64(len(got[0].val))) }

// hitValue replies with a key's value, or null, and counts a hit or a miss.
func (c *conn) hitValue(l lookup) {
	if l.found {
		c.hits++
	} else {
		c.misses++
	}
	c.value(l.val, l.found)
}

// rangeCmd is RANGE start end [LIMIT n]: every pair with start <= key <= end
// in byte order, as a flat array key, value, key, value, ...
func (c *conn) rangeCmd(args [][]byte) {
	limit := 0
	switch {
	case len(args) == 3:
	case len(args) == 5 && strings.EqualFold(string(args[3]), "limit"):
		n, ok := intArg(args[4])
		if !ok || n < 0 {
			c.err("ERR LIMIT must be a non-negative integer")
			return
		}
		if n == 0 {
			c.out = protocol.AppendArray(c.out, 0)
			return
		}
		limit = int(min(n, 1<<31))
	default:
		c.errSyntax()
		return
	}
	s, ok := c.read()
	if !ok {
		return
	}
	if limit > 0 && limit <= shortRange {
		c.pairs = s.RangeN(args[1], args[2], limit, c.pairs[:0])
		if c.rangeMoving(s) {
			clear(c.pairs)
			return
		}
		c.out = protocol.AppendArray(c.out, 2*len(c.pairs))
		for i, p := range c.pairs {
			c.bulkString(p.Key)
			c.writeLarge(p.Val)
			c.pairs[i] = store.Pair{} // let the values go
		}
		return
	}
	snap := s.Snapshot()
	if c.rangeMoving(s) {
		return
	}
	n := snap.Count(args[1], args[2], limit)
	c.out = protocol.AppendArray(c.out, 2*n)
	snap.Range(args[1], args[2], n, func(k string, v []byte) bool {
		c.bulkString(k)
		c.writeLarge(v)
		return !c.quit
	})
}

// shortRange is the largest LIMIT served by store.RangeN, which merges the
// live indexes under the store's locks; longer and unlimited ranges read a
// snapshot, so that writers are not held off while the reply streams out.
const shortRange = 1024

// set is SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL].
func (c *conn) set(args [][]byte) {
	flags, exp, ok := c.setOptions(args[3:])
	if !ok {
		return
	}
	reply := replySet
	if flags&store.SetGet != 0 {
		reply = replyValue
	}
	if exp != nil {
		c.setWithExpiry("set", flags, *exp, reply, args[1], args[2])
		return
	}
	c.write(store.OpSet, flags, reply, args[1], args[2])
}

func (c *conn) setnx(args [][]byte) {
	c.write(store.OpSet, store.SetNX, replyBool, args[1], args[2])
}

// swap is SWAP (and GETSET): set the value, reply with the old one or nil.
func (c *conn) swap(args [][]byte) {
	c.write(store.OpSet, store.SetGet, replyValue, args[1], args[2])
}

func (c *conn) cas(args [][]byte) {
	c.write(store.OpCAS, 0, replyBool, args[1], args[2], args[3])
}

func (c *conn) mset(args [][]byte) {
	if len(args)%2 == 0 {
		c.errArity("mset")
		return
	}
	c.write(store.OpMSet, 0, replyOK, args[1:]...)
}

func (c *conn) msetnx(args [][]byte) {
	if len(args)%2 == 0 {
		c.errArity("msetnx")
		return
	}
	c.write(store.OpMSetNX, 0, replyBool, args[1:]...)
}

func (c *conn) del(args [][]byte) {
	c.write(store.OpDel, 0, replyInt, args[1:]...)
}

func (c *conn) incr(args [][]byte) { c.incrBy(args[1], 1) }
func (c *conn) decr(args [][]byte) { c.incrBy(args[1], -1) }

func (c *conn) incrby(args [][]byte) {
	if n, ok := intArg(args[2]); ok {
		c.incrBy(args[1], n)
	} else {
		c.errNotInt()
	}
}

func (c *conn) decrby(args [][]byte) {
	n, ok := intArg(args[2])
	switch {
	case !ok:
		c.errNotInt()
	case n == -1<<63:
		c.err("ERR decrement would overflow")
	default:
		c.incrBy(args[1], -n)
	}
}

func (c *conn) incrBy(key []byte, delta int64) {
	c.write(store.OpIncrBy, 0, replyInt, key, store.DeltaArg(delta))
}

func (c *conn) append(args [][]byte) {
	c.write(store.OpAppend, 0, replyInt, args[1], args[2])
}
