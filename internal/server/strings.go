package server

import (
	"strings"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/store"
)

// stringCommands are the string commands beyond GET and SET's family:
// ranges, floats and LCS here, the bit commands in bits.go. Their replies
// and errors are Redis 7's.
var stringCommands = []*command{
	{name: "getdel", arity: 2, flags: "write fast", first: 1, last: 1, step: 1, run: (*conn).getdel},
	{name: "incrbyfloat", arity: 3, flags: "write denyoom fast", first: 1, last: 1, step: 1, run: (*conn).incrbyfloat},
	{name: "getrange", arity: 4, flags: "readonly", first: 1, last: 1, step: 1, run: (*conn).getrange},
	{name: "substr", arity: 4, flags: "readonly", first: 1, last: 1, step: 1, run: (*conn).getrange},
	{name: "setrange", arity: 4, flags: "write denyoom", first: 1, last: 1, step: 1, run: (*conn).setrange},
	{name: "lcs", arity: -3, flags: "readonly", first: 1, last: 2, step: 1, run: (*conn).lcs},
	{name: "setbit", arity: 4, flags: "write denyoom", first: 1, last: 1, step: 1, run: (*conn).setbit},
	{name: "getbit", arity: 3, flags: "readonly fast", first: 1, last: 1, step: 1, run: (*conn).getbit},
	{name: "bitcount", arity: -2, flags: "readonly", first: 1, last: 1, step: 1, run: (*conn).bitcount},
	{name: "bitpos", arity: -3, flags: "readonly", first: 1, last: 1, step: 1, run: (*conn).bitpos},
	{name: "bitop", arity: -4, flags: "write denyoom", first: 2, last: -1, step: 1, run: (*conn).bitop},
	{name: "bitfield", arity: -2, flags: "write denyoom", first: 1, last: 1, step: 1, run: (*conn).bitfield},
	{name: "bitfield_ro", arity: -2, flags: "readonly fast", first: 1, last: 1, step: 1, run: (*conn).bitfieldRO},
}

// maxBulk is Redis's default proto-max-bulk-len, 512 MiB, which bounds the
// offsets Redis takes in SETRANGE and the bit commands: past it they get
// Redis's errors. Flint's own value limit (--max-bulk, store.Options.MaxValue)
// is checked when the write applies, with ErrTooLarge.
const maxBulk = 512 << 20

func (c *conn) getdel(args [][]byte) { c.write(store.OpGetDel, 0, replyValue, args[1]) }

// incrbyfloat checks the increment before it goes in the log; the store
// parses it again (see store.ParseFloat) and adds it to the value.
func (c *conn) incrbyfloat(args [][]byte) {
	if _, ok := store.ParseFloat(args[2]); !ok {
		c.err("ERR value is not a valid float")
		return
	}
	c.write(store.OpIncrByFloat, 0, replyBulk, args[1], args[2])
}

func replyBulk(c *conn, res store.Result) { c.writeLarge(res.Val) }

// getrange is GETRANGE (and SUBSTR) key start end.
func (c *conn) getrange(args [][]byte) {
	start, ok1 := intArg(args[2])
	end, ok2 := intArg(args[3])
	if !ok1 || !ok2 {
		c.errNotInt()
		return
	}
	if v, _, ok := c.getValue(args[1]); ok {
		c.writeLarge(substr(v, start, end))
	}
}

// substr returns v[start:end+1] as Redis 7.0's GETRANGE reads it:
// negative indexes count from the end, and both are clamped into v.
func substr(v []byte, start, end int64) []byte {
	n := int64(len(v))
	if start < 0 && end < 0 && start > end {
		return nil
	}
	start, end = clampIndex(start, n), min(clampIndex(end, n), n-1)
	if start > end || n == 0 {
		return nil
	}
	return v[start : end+1]
}

// clampIndex turns a negative index into one from the end of a string of
// length n, and clamps it to 0.
func clampIndex(i, n int64) int64 {
	if i < 0 {
		i += n
	}
	return max(i, 0)
}

// getValue reads key's value for a read command, once the read barrier has
// run (see read); ok is false if it replied with an error instead.
//
// Inside a transaction it reads what the transaction's entries before the
// command left (see txRead).
func (c *conn) getValue(key []byte) (val []byte, found, ok bool) {
	if c.tx.build != nil || c.tx.looked != nil {
		return c.txRead(store.OpRead, key)
	}
	s, ok := c.read()
	if !ok {
		return nil, false, false
	}
	val, found = s.Get(key)
	return val, found, true
}

func (c *conn) setrange(args [][]byte) {
	offset, ok := intArg(args[2])
	switch {
	case !ok:
		c.errNotInt()
	case offset < 0:
		c.err("ERR offset is out of range")
	case len(args[3]) > 0 && offset > maxBulk-int64(len(args[3])):
		c.err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
	default:
		c.write(store.OpSetRange, 0, replyInt, args[1], store.Uint64Arg(uint64(offset)), args[3])
	}
}

// lcs is LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN].
func (c *conn) lcs(args [][]byte) {
	var q lcsQuery
	for i := 3; i < len(args); i++ {
		switch opt := strings.ToLower(string(args[i])); {
		case opt == "idx":
			q.idx = true
		case opt == "len":
			q.len = true
		case opt == "withmatchlen":
			q.withLen = true
		case opt == "minmatchlen" && i+1 < len(args):
			n, ok := intArg(args[i+1])
			if !ok {
				c.errNotInt()
				return
			}
			q.minLen = max(n, 0)
			i++
		default:
			c.errSyntax()
			return
		}
	}
	if q.idx && q.len {
		c.err("ERR If you want both the length and indexes, please just use IDX.")
		return
	}
	a, _, ok := c.getValue(args[1])
	if !ok {
		return
	}
	b, _, _ := c.getValue(args[2]) // the read barrier ran for a
	if int64(len(a)+1)*int64(len(b)+1)*4 > int64(c.srv.cfg.MaxBulk) {
		c.err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
		return
	}
	c.replyLCS(q, a, b)
}

// lcsQuery holds LCS's options.
type lcsQuery struct {
	idx, len, withLen bool
	minLen            int64
}

// replyLCS computes the longest common subsequence of a and b as Redis
// does, by dynamic programming over a table of (len(a)+1)*(len(b)+1)
// lengths (which lcs bounds by --max-bulk, as Redis by proto-max-bulk-len),
// and replies as q asks: the subsequence, its length, or its matching
// ranges, found walking back from the ends as Redis walks.
func (c *conn) replyLCS(q lcsQuery, a, b []byte) {
	w := len(b) + 1
	dp := make([]uint32, (len(a)+1)*w)
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			if a[i-1] == b[j-1] {
				dp[i*w+j] = dp[(i-1)*w+j-1] + 1
			} else {
				dp[i*w+j] = max(dp[(i-1)*w+j], dp[i*w+j-1])
			}
		}
	}
	n := dp[len(a)*w+len(b)]
	if q.len {
		c.int(int64(n))
		return
	}
	seq, ranges := lcsWalk(a, b, dp, n)
	if !q.idx {
		c.writeLarge(seq)
		return
	}
	var kept [][5]int64
	for _, r := range ranges {
		if q.minLen == 0 || r[4] >= q.minLen {
			kept = append(kept, r)
		}
	}
	c.out = protocol.AppendMap(c.out, 2, c.proto)
	c.bulkString("matches")
	c.out = protocol.AppendArray(c.out, len(kept))
	fields := 2
	if q.withLen {
		fields = 3
	}
	for _, r := range kept {
		c.out = protocol.AppendArray(c.out, fields)
		c.out = protocol.AppendArray(c.out, 2)
		c.int(r[0])
		c.int(r[1])
		c.out = protocol.AppendArray(c.out, 2)
		c.int(r[2])
		c.int(r[3])
		if q.withLen {
			c.int(r[4])
		}
	}
	c.bulkString("len")
	c.int(int64(n))
}

// lcsWalk walks dp back from its end as Redis does, and returns the
// subsequence and its matching ranges, the last first: a start, a end, b
// start, b end, length.
func lcsWalk(a, b []byte, dp []uint32, n uint32) ([]byte, [][5]int64) {
	w := len(b) + 1
	seq := make([]byte, n)
	var ranges [][5]int64
	alen := int64(len(a))
	as, ae, bs, be := alen, int64(0), int64(0), int64(0) // as == alen: no range open
	for i, j, k := len(a), len(b), int(n); i > 0 && j > 0; {
		emit := false
		if a[i-1] == b[j-1] {
			seq[k-1] = a[i-1]
			switch {
			case as == alen:
				as, ae, bs, be = int64(i-1), int64(i-1), int64(j-1), int64(j-1)
			case as == int64(i) && bs == int64(j):
				as, bs = as-1, bs-1
			default:
				emit = true
			}
			if as == 0 || bs == 0 {
				emit = true
			}
			i, j, k = i-1, j-1, k-1
		} else {
			if dp[(i-1)*w+j] > dp[i*w+j-1] {
				i--
			} else {
				j--
			}
			emit = as != alen
		}
		if emit {
			ranges = append(ranges, [5]int64{as, ae, bs, be, ae - as + 1})
			as = alen
		}
	}
	return seq, ranges
}
