package store

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// Bit strings, as Redis's bit commands see a value: bit 0 is the most
// significant bit of the first byte, and bits past the end are 0.

// BITOP's operations, the flags of an OpBitOp.
const (
	BitAnd byte = 1
	BitOr  byte = 2
	BitXor byte = 3
	BitNot byte = 4
)

// BitOf returns bit i of v.
func BitOf(v []byte, i uint64) byte {
	if i>>3 >= uint64(len(v)) {
		return 0
	}
	return v[i>>3] >> (7 - i&7) & 1
}

func (s *Store) setBit(key []byte, offset uint64, bit byte) Result {
	return s.update(key, func(old []byte, _ bool) ([]byte, Result) {
		if offset>>3 >= uint64(s.maxValue) {
			return nil, Result{Err: ErrTooLarge}
		}
		v := grown(old, int(offset>>3)+1)
		r := Result{Int: int64(BitOf(v, offset))}
		mask := byte(1) << (7 - offset&7)
		v[offset>>3] = v[offset>>3]&^mask | bit<<(7-offset&7)
		return v, r
	})
}

func (s *Store) bitOp(op byte, dst []byte, srcs [][]byte) Result {
	ls := s.lockSetOf(append([][]byte{dst}, srcs...), 1)
	s.lock(ls)
	defer s.unlock(ls)
	now := s.nowMs()
	vals := make([][]byte, len(srcs))
	n := 0
	for i, k := range srcs {
		st, h := s.locate(k)
		vals[i] = st.liveLocked(h, k, now).value()
		n = max(n, len(vals[i]))
	}
	st, h := s.locate(dst)
	if n == 0 {
		st.deleteLocked(h, dst)
		return Result{}
	}
	out := make([]byte, n)
	for j := range out {
		out[j] = combine(op, vals, j)
	}
	st.putLocked(h, dst, out)
	st.clearDeadlineLocked(dst) // as SET: the result has no deadline
	return Result{Int: int64(n)}
}

// combine returns byte j of BITOP op over vals, each zero-padded.
func combine(op byte, vals [][]byte, j int) byte {
	at := func(v []byte) byte {
		if j < len(v) {
			return v[j]
		}
		return 0
	}
	b := at(vals[0])
	for _, v := range vals[1:] {
		switch op {
		case BitAnd:
			b &= at(v)
		case BitOr:
			b |= at(v)
		case BitXor:
			b ^= at(v)
		}
	}
	if op == BitNot {
		b = ^b
	}
	return b
}

// BitCount returns how many bits of v[from:to] are set, from and to in
// bits, 0 <= from <= to <= 8*len(v).
func BitCount(v []byte, from, to uint64) int64 {
	var n int64
	for from < to && from&7 != 0 {
		n += int64(BitOf(v, from))
		from++
	}
	for ; from+64 <= to; from += 64 {
		n += int64(bits.OnesCount64(binary.BigEndian.Uint64(v[from>>3:])))
	}
	for ; from+8 <= to; from += 8 {
		n += int64(bits.OnesCount8(v[from>>3]))
	}
	for ; from < to; from++ {
		n += int64(BitOf(v, from))
	}
	return n
}

// BitPos returns the first bit of v[from:to] (in bits, as BitCount) that
// is bit, or -1 if there is none.
func BitPos(v []byte, from, to uint64, bit byte) int64 {
	skip := byte(0)
	if bit == 0 {
		skip = 0xff
	}
	for from < to {
		if from&7 == 0 && from+8 <= to && v[from>>3] == skip {
			from += 8
			continue
		}
		if BitOf(v, from) == bit {
			return int64(from)
		}
		from++
	}
	return -1
}

// OVERFLOW modes of BITFIELD.
const (
	OverflowWrap byte = 0
	OverflowSat  byte = 1
	OverflowFail byte = 2
)

// The kinds of BITFIELD subcommand.
const (
	BitfieldGet  byte = 0
	BitfieldSet  byte = 1
	BitfieldIncr byte = 2
)

// A BitfieldOp is one GET, SET or INCRBY of BITFIELD, with the OVERFLOW
// mode in force for it.
type BitfieldOp struct {
	Kind     byte // BitfieldGet, BitfieldSet or BitfieldIncr
	Overflow byte // OverflowWrap, OverflowSat or OverflowFail
	Signed   bool
	Bits     uint8  // 1 to 64 if Signed, else 1 to 63
	Offset   uint64 // in bits
	Value    int64  // SET's value, INCRBY's increment
}

// bitfieldArgLen is the length of BitfieldOp.Arg.
const bitfieldArgLen = 20

// Arg encodes op as an argument of an OpBitField entry:
//
//	+------+----------+--------+------+---------------+--------------+
//	| kind | overflow | signed | bits | offset uint64 | value int64  |
//	+------+----------+--------+------+---------------+--------------+
//	 1 B    1 B        1 B      1 B    8 B big-endian  8 B big-endian
func (op BitfieldOp) Arg() []byte {
	b := []byte{op.Kind, op.Overflow, 0, op.Bits}
	if op.Signed {
		b[2] = 1
	}
	b = binary.BigEndian.AppendUint64(b, op.Offset)
	return binary.BigEndian.AppendUint64(b, uint64(op.Value))
}

func bitfieldOpOf(b []byte) BitfieldOp {
	return BitfieldOp{Kind: b[0], Overflow: b[1], Signed: b[2] == 1, Bits: b[3],
		Offset: binary.BigEndian.Uint64(b[4:]), Value: int64(binary.BigEndian.Uint64(b[12:]))}
}

// checkBitfieldArgs reports whether args are well-formed BitfieldOp.Args.
func checkBitfieldArgs(args [][]byte) bool {
	for _, a := range args {
		if len(a) != bitfieldArgLen {
			return false
		}
		op := bitfieldOpOf(a)
		if op.Kind > BitfieldIncr || op.Overflow > OverflowFail || a[2] > 1 || op.Bits < 1 ||
			op.Bits > 64 || (!op.Signed && op.Bits > 63) || op.Offset > math.MaxUint64-64 {
			return false
		}
	}
	return true
}

// Bitfield reads the field op names in v: the value of a GET.
func (op BitfieldOp) Bitfield(v []byte) int64 {
	var x uint64
	for i := uint64(0); i < uint64(op.Bits); i++ {
		x = x<<1 | uint64(BitOf(v, op.Offset+i))
	}
	if op.Signed && op.Bits < 64 && x>>(op.Bits-1) == 1 {
		x |= math.MaxUint64 << op.Bits // sign-extend
	}
	return int64(x)
}

// put writes x's low op.Bits bits into op's field of v, which is long enough.
func (op BitfieldOp) put(v []byte, x uint64) {
	for i := uint64(0); i < uint64(op.Bits); i++ {
		at := op.Offset + i
		mask := byte(1) << (7 - at&7)
		if x>>(uint64(op.Bits)-1-i)&1 == 1 {
			v[at>>3] |= mask
		} else {
			v[at>>3] &^= mask
		}
	}
}

// apply applies a SET or INCRBY to v, which is long enough, and returns
// its reply, or ok false for an overflow that OverflowFail refuses (nothing
// is written then).
func (op BitfieldOp) apply(v []byte) (reply int64, ok bool) {
	old := op.Bitfield(v)
	var next int64
	var over bool
	if op.Kind == BitfieldIncr {
		next, over = op.fit(old, op.Value)
		reply = next
	} else {
		next, over = op.fit(op.Value, 0)
		reply = old
	}
	if over && op.Overflow == OverflowFail {
		return 0, false
	}
	op.put(v, uint64(next))
	return reply, true
}

// fit returns x+incr as op's field type holds it under op's OVERFLOW
// mode, and whether it overflowed: Redis's checkSignedBitfieldOverflow
// and checkUnsignedBitfieldOverflow.
func (op BitfieldOp) fit(x, incr int64) (int64, bool) {
	if op.Signed {
		return op.fitSigned(x, incr)
	}
	return op.fitUnsigned(uint64(x), incr)
}

func (op BitfieldOp) fitSigned(x, incr int64) (int64, bool) {
	hi := int64(math.MaxInt64)
	if op.Bits < 64 {
		hi = 1<<(op.Bits-1) - 1
	}
	lo := -hi - 1
	// As in Redis, maxIncr and minIncr may wrap; they are used only where
	// they do not.
	maxIncr, minIncr := int64(uint64(hi)-uint64(x)), lo-x
	sum := int64(uint64(x) + uint64(incr))
	switch {
	case x > hi || (op.Bits != 64 && incr > maxIncr) || (x >= 0 && incr > 0 && incr > maxIncr):
		return op.overflow(sum, hi), true
	case x < lo || (op.Bits != 64 && incr < minIncr) || (x < 0 && incr < 0 && incr < minIncr):
		return op.overflow(sum, lo), true
	}
	return sum, false
}

func (op BitfieldOp) fitUnsigned(x uint64, incr int64) (int64, bool) {
	hi := uint64(1)<<op.Bits - 1
	maxIncr, minIncr := int64(hi-x), -int64(x)
	sum := int64(x + uint64(incr))
	switch {
	case x > hi || (incr > 0 && incr > maxIncr):
		return op.overflow(sum, int64(hi)), true
	case incr < 0 && incr < minIncr:
		return op.overflow(sum, 0), true
	}
	return sum, false
}

// overflow returns what an overflowing field holds: sum wrapped to the
// field's width (sign-extended if signed), or limit if saturating.
func (op BitfieldOp) overflow(sum, limit int64) int64 {
	if op.Overflow == OverflowSat {
		return limit
	}
	if op.Bits == 64 {
		return sum
	}
	u := uint64(sum) &^ (math.MaxUint64 << op.Bits)
	if op.Signed && u>>(op.Bits-1) == 1 {
		u |= math.MaxUint64 << op.Bits
	}
	return int64(u)
}

// bitField applies the BitfieldOp.Args ops to key's value, in order. If
// any is a write, the value first grows to hold every write's field, and
// exists from then on, even if OverflowFail refuses every write (as in
// Redis). Its result's Val holds the replies (see BitfieldReply).
func (s *Store) bitField(key []byte, args [][]byte) Result {
	return s.update(key, func(old []byte, _ bool) ([]byte, Result) {
		need, writes := uint64(0), false
		for _, a := range args {
			if op := bitfieldOpOf(a); op.Kind != BitfieldGet {
				need, writes = max(need, (op.Offset+uint64(op.Bits)+7)>>3), true
			}
		}
		if need > uint64(s.maxValue) {
			return nil, Result{Err: ErrTooLarge}
		}
		v := old
		if writes {
			v = grown(old, int(need))
		}
		out := make([]byte, 0, 9*len(args))
		for _, a := range args {
			op := bitfieldOpOf(a)
			reply, ok := op.Bitfield(v), true
			if op.Kind != BitfieldGet {
				reply, ok = op.apply(v)
			}
			out = appendBitfieldReply(out, reply, ok)
		}
		if !writes {
			v = nil
		}
		return v, Result{Val: out}
	})
}

// A BITFIELD result's Val holds a reply for each op, 9 bytes each: 1 for
// an integer, 0 for a nil (an overflow that OVERFLOW FAIL refused), then
// the integer, 8 bytes big-endian.
func appendBitfieldReply(b []byte, x int64, ok bool) []byte {
	if !ok {
		return append(b, make([]byte, 9)...)
	}
	b = append(b, 1)
	return binary.BigEndian.AppendUint64(b, uint64(x))
}

// BitfieldReply returns reply i of a BITFIELD result's Val, and false if it
// is nil.
func BitfieldReply(val []byte, i int) (int64, bool) {
	b := val[9*i:]
	return int64(binary.BigEndian.Uint64(b[1:9])), b[0] == 1
}
