package server

import (
	"strings"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/store"
)

// The bit commands (in stringCommands) see a value as Redis does, a string
// of bits, the first the most significant bit of the first byte (see
// store's bits.go). Their errors are Redis 7's.

const (
	errBitOffset = "ERR bit offset is not an integer or out of range"
	errBitType   = "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."
)

// bitOffset parses a bit offset as Redis does: an integer from 0, whose
// byte is below maxBulk. Where hash is true, "#n" is n fields of width
// bits (BITFIELD's form).
func bitOffset(b []byte, hash bool, width uint8) (uint64, bool) {
	n := int64(1)
	if hash && len(b) > 0 && b[0] == '#' {
		b, n = b[1:], int64(width)
	}
	x, ok := intArg(b)
	if !ok || x < 0 || x > maxBulk*8/n {
		return 0, false
	}
	x *= n
	return uint64(x), x>>3 < maxBulk
}

func (c *conn) setbit(args [][]byte) {
	offset, ok := bitOffset(args[2], false, 0)
	if !ok {
		c.err(errBitOffset)
		return
	}
	bit, ok := intArg(args[3])
	if !ok || bit&^1 != 0 {
		c.err("ERR bit is not an integer or out of range")
		return
	}
	c.write(store.OpSetBit, byte(bit), replyInt, args[1], store.Uint64Arg(offset))
}

func (c *conn) getbit(args [][]byte) {
	offset, ok := bitOffset(args[2], false, 0)
	if !ok {
		c.err(errBitOffset)
		return
	}
	if v, _, ok := c.getValue(args[1]); ok {
		c.int(int64(store.BitOf(v, offset)))
	}
}

// bitRange parses BITCOUNT's and BITPOS's start, end and unit (BYTE, the
// default, or BIT), of a value of n bytes, as Redis 7.0 does: negative
// indexes count from the end, and both are clamped into the value. It
// returns the range in bits, [from, to), with empty true if it holds
// nothing; ok is false if it replied with an error. An absent end (nil)
// is the last byte.
func (c *conn) bitRange(n int64, start, end, unit []byte) (from, to uint64, empty, ok bool) {
	s, ok1 := intArg(start)
	e, ok2 := n-1, true
	if end != nil {
		e, ok2 = intArg(end)
	}
	if !ok1 || !ok2 {
		c.errNotInt()
		return 0, 0, false, false
	}
	isBit := false
	if unit != nil {
		switch strings.ToLower(string(unit)) {
		case "bit":
			isBit = true
		case "byte":
		default:
			c.errSyntax()
			return 0, 0, false, false
		}
	}
	total := n
	if isBit {
		total *= 8
	}
	s, e = clampIndex(s, total), clampIndex(e, total)
	e = min(e, total-1)
	if s > e {
		return 0, 0, true, true
	}
	if isBit {
		return uint64(s), uint64(e + 1), false, true
	}
	return uint64(s) * 8, uint64(e+1) * 8, false, true
}

// bitcount is BITCOUNT key [start end [BYTE|BIT]].
func (c *conn) bitcount(args [][]byte) {
	v, found, ok := c.getValue(args[1])
	switch {
	case !ok:
	case !found:
		c.int(0)
	case len(args) == 2:
		c.int(store.BitCount(v, 0, uint64(len(v))*8))
	case len(args) == 4 || len(args) == 5:
		if bothNegativeReversed(args[2], args[3]) {
			c.int(0)
			return
		}
		from, to, empty, ok := c.bitRange(int64(len(v)), args[2], args[3], optArg(args, 4))
		switch {
		case !ok:
		case empty:
			c.int(0)
		default:
			c.int(store.BitCount(v, from, to))
		}
	default:
		c.errSyntax()
	}
}

// bothNegativeReversed reports whether start and end are integers with
// end < start < 0, a range Redis answers as empty before it reads a
// unit.
func bothNegativeReversed(start, end []byte) bool {
	s, ok1 := intArg(start)
	e, ok2 := intArg(end)
	return ok1 && ok2 && s < 0 && e < 0 && s > e
}

// optArg returns args[i], or nil if there is none.
func optArg(args [][]byte, i int) []byte {
	if i < len(args) {
		return args[i]
	}
	return nil
}

// bitpos is BITPOS key bit [start [end [BYTE|BIT]]]: the first bit of
// the range that is bit, or -1. A missing key is all 0 bits; so is what
// follows a value when no end is given, so that a search for a 0 with no
// end finds the first bit past the value.
func (c *conn) bitpos(args [][]byte) {
	bit, ok := intArg(args[2])
	switch {
	case !ok:
		c.errNotInt()
		return
	case bit != 0 && bit != 1:
		c.err("ERR The bit argument must be 1 or 0.")
		return
	}
	v, found, ok := c.getValue(args[1])
	switch {
	case !ok:
		return
	case !found:
		c.int(-bit)
		return
	case len(args) > 6:
		c.errSyntax()
		return
	}
	from, to, empty := uint64(0), uint64(len(v))*8, len(v) == 0
	if len(args) > 3 {
		if from, to, empty, ok = c.bitRange(int64(len(v)), args[3], optArg(args, 4), optArg(args, 5)); !ok {
			return
		}
	}
	if empty {
		c.int(-1)
		return
	}
	pos := store.BitPos(v, from, to, byte(bit))
	if pos < 0 && bit == 0 && len(args) < 5 {
		pos = int64(to)
	}
	c.int(pos)
}

// bitop is BITOP AND|OR|XOR|NOT destkey srckey [srckey ...].
func (c *conn) bitop(args [][]byte) {
	var op byte
	switch strings.ToLower(string(args[1])) {
	case "and":
		op = store.BitAnd
	case "or":
		op = store.BitOr
	case "xor":
		op = store.BitXor
	case "not":
		op = store.BitNot
	default:
		c.errSyntax()
		return
	}
	if op == store.BitNot && len(args) != 4 {
		c.err("ERR BITOP NOT must be called with a single source key.")
		return
	}
	c.write(store.OpBitOp, op, replyInt, args[2:]...)
}

func (c *conn) bitfield(args [][]byte)   { c.bitfieldCmd(args, false) }
func (c *conn) bitfieldRO(args [][]byte) { c.bitfieldCmd(args, true) }

// bitfieldCmd is BITFIELD and BITFIELD_RO. One with only GETs is served as
// a read; one that writes goes in the log, whole, as an OpBitField.
func (c *conn) bitfieldCmd(args [][]byte, readOnly bool) {
	ops, writes, ok := c.parseBitfield(args)
	switch {
	case !ok:
	case writes && readOnly:
		c.err("ERR BITFIELD_RO only supports the GET subcommand")
	case writes:
		enc := make([][]byte, 1, 1+len(ops))
		enc[0] = args[1]
		for _, op := range ops {
			enc = append(enc, op.Arg())
		}
		c.write(store.OpBitField, 0, replyBitfield, enc...)
	default:
		c.commit() // BITFIELD is a write command, which exec does not commit before
		v, _, ok := c.getValue(args[1])
		if !ok {
			return
		}
		c.out = protocol.AppendArray(c.out, len(ops))
		for _, op := range ops {
			c.int(op.Bitfield(v))
		}
	}
}

// replyBitfield replies to a BITFIELD that wrote: a reply for each of its
// ops (see store.BitfieldReply).
func replyBitfield(c *conn, res store.Result) {
	n := len(res.Val) / 9
	c.out = protocol.AppendArray(c.out, n)
	for i := range n {
		if x, ok := store.BitfieldReply(res.Val, i); ok {
			c.int(x)
		} else {
			c.null()
		}
	}
}

// parseBitfield parses BITFIELD's subcommands as Redis does, and reports
// whether any writes; ok is false if it replied with an error.
func (c *conn) parseBitfield(args [][]byte) (ops []store.BitfieldOp, writes, ok bool) {
	overflow := store.OverflowWrap
	for j := 2; j < len(args); j++ {
		rest := len(args) - j - 1
		var op store.BitfieldOp
		switch sub := strings.ToLower(string(args[j])); {
		case sub == "get" && rest >= 2:
			op.Kind = store.BitfieldGet
		case sub == "set" && rest >= 3:
			op.Kind = store.BitfieldSet
		case sub == "incrby" && rest >= 3:
			op.Kind = store.BitfieldIncr
		case sub == "overflow" && rest >= 1:
			if overflow, ok = overflowMode(args[j+1]); !ok {
				c.err("ERR Invalid OVERFLOW type specified")
				return nil, false, false
			}
			j++
			continue
		default:
			c.errSyntax()
			return nil, false, false
		}
		if op.Signed, op.Bits, ok = bitfieldType(args[j+1]); !ok {
			c.err(errBitType)
			return nil, false, false
		}
		if op.Offset, ok = bitOffset(args[j+2], true, op.Bits); !ok {
			c.err(errBitOffset)
			return nil, false, false
		}
		j += 2
		if op.Kind != store.BitfieldGet {
			j++
			if op.Value, ok = intArg(args[j]); !ok {
				c.errNotInt()
				return nil, false, false
			}
			writes = true
		}
		op.Overflow = overflow
		ops = append(ops, op)
	}
	return ops, writes, true
}

func overflowMode(b []byte) (byte, bool) {
	switch strings.ToLower(string(b)) {
	case "wrap":
		return store.OverflowWrap, true
	case "sat":
		return store.OverflowSat, true
	case "fail":
		return store.OverflowFail, true
	}
	return 0, false
}

// bitfieldType parses a field type: i1 to i64, or u1 to u63.
func bitfieldType(b []byte) (signed bool, bits uint8, ok bool) {
	if len(b) < 2 {
		return false, 0, false
	}
	switch b[0] {
	case 'i', 'I':
		signed = true
	case 'u', 'U':
	default:
		return false, 0, false
	}
	n, ok := intArg(b[1:])
	if !ok || n < 1 || n > 64 || (!signed && n > 63) {
		return false, 0, false
	}
	return signed, uint8(n), true
}
