package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// The keyspace and string ops (numbers 40 to 69). Like every op, their
// numbers are part of the on-disk format.
const (
	OpGetDel      Op = 40 // args: key; Found, Val: the value it removed
	OpIncrByFloat Op = 41 // args: key, increment (as the client wrote it, see ParseFloat); Val: the new value
	OpSetRange    Op = 42 // args: key, offset (8 bytes, see Uint64Arg), data; Int: the new length
	OpSetBit      Op = 43 // args: key, bit offset (8 bytes); flags: the bit (0 or 1); Int: the old bit
	OpBitOp       Op = 44 // args: destination, source, ...; flags: BitAnd, BitOr, BitXor or BitNot; Int: the new length
	OpBitField    Op = 45 // args: key, op, ... (see BitfieldOp.Arg); Val: the replies (see BitfieldReply)
	OpRename      Op = 46 // args: source, destination; flags: RenameNX; Done: whether it moved the value
	OpCopy        Op = 47 // args: source, destination; flags: CopyReplace; Done: whether it copied the value
)

// Flags of OpRename and OpCopy.
const (
	RenameNX    byte = 1 << 0 // move only if the destination does not exist
	CopyReplace byte = 1 << 0 // copy even if the destination exists, replacing it
)

// Errors of the keyspace and string ops, in Result.Err.
var (
	ErrNoSuchKey = errors.New("store: no such key")
	ErrNotFloat  = errors.New("store: value is not a valid float")
	ErrNaN       = errors.New("store: increment would produce NaN or Infinity")
)

// keyspaceOp reports whether op is one of this file's.
func keyspaceOp(op Op) bool { return op >= OpGetDel && op <= OpCopy }

// keyspaceKeys returns the keys of an entry of a keyspace op, as
// entry.keys does.
func (e entry) keyspaceKeys() [][]byte {
	switch e.op {
	case OpRename, OpCopy, OpBitOp:
		return e.args
	}
	return e.args[:1]
}

// keyspaceCheck reports whether e, of a keyspace op, has the arguments its
// op needs.
func (e entry) keyspaceCheck() bool {
	n := len(e.args)
	switch e.op {
	case OpGetDel:
		return n == 1
	case OpIncrByFloat, OpRename, OpCopy:
		return n == 2
	case OpSetRange:
		return n == 3 && len(e.args[1]) == 8
	case OpSetBit:
		return n == 2 && len(e.args[1]) == 8 && e.flags <= 1
	case OpBitOp:
		return n >= 2 && e.flags >= BitAnd && e.flags <= BitNot && (e.flags != BitNot || n == 2)
	case OpBitField:
		return n >= 1 && checkBitfieldArgs(e.args[1:])
	}
	return false
}

// applyKeyspace applies an entry of a keyspace op.
func (s *Store) applyKeyspace(e entry) Result {
	switch e.op {
	case OpGetDel:
		return s.getDel(e.args[0])
	case OpIncrByFloat:
		return s.incrByFloat(e.args[0], e.args[1])
	case OpSetRange:
		return s.setRange(e.args[0], binary.BigEndian.Uint64(e.args[1]), e.args[2])
	case OpSetBit:
		return s.setBit(e.args[0], binary.BigEndian.Uint64(e.args[1]), e.flags)
	case OpBitOp:
		return s.bitOp(e.flags, e.args[0], e.args[1:])
	case OpBitField:
		return s.bitField(e.args[0], e.args[1:])
	case OpRename:
		return s.rename(e.args[0], e.args[1], e.flags&RenameNX != 0)
	case OpCopy:
		return s.copyKey(e.args[0], e.args[1], e.flags&CopyReplace != 0)
	}
	panic(fmt.Sprintf("store: applyKeyspace of op %d", e.op))
}

func (s *Store) getDel(key []byte) Result {
	st, h := s.locate(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	old := st.liveLocked(h, key, s.nowMs())
	if old == nil {
		return Result{}
	}
	v := old.val
	st.deleteLocked(h, key)
	return Result{Done: true, Found: true, Val: v}
}

// update replaces key's value with what fn makes of it (nil, false for a
// missing key). fn returns the new value, which the store then owns, and
// the result; a result with Err, or a nil value, changes nothing. The key
// keeps its deadline, if it has one (as Redis's SETRANGE, SETBIT,
// INCRBYFLOAT and BITFIELD keep a key's TTL); an expired key is missing.
func (s *Store) update(key []byte, fn func(old []byte, found bool) ([]byte, Result)) Result {
	st, h := s.locate(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	old := st.liveLocked(h, key, s.nowMs())
	v, r := fn(old.value(), old != nil)
	if r.Err == nil && v != nil {
		st.replaceLocked(old, h, key, v)
	}
	return r
}

// grown returns a copy of v at least n bytes long, zero-padded, with room
// for nothing more: a stored value's bytes are never modified in place (see
// stripe), so every change to one copies it.
func grown(v []byte, n int) []byte {
	out := make([]byte, max(n, len(v)))
	copy(out, v)
	return out
}

func (s *Store) setRange(key []byte, offset uint64, data []byte) Result {
	return s.update(key, func(old []byte, found bool) ([]byte, Result) {
		switch {
		case len(data) == 0: // Redis: nothing to write, nothing created
			return nil, Result{Int: int64(len(old))}
		case offset > uint64(s.maxValue) || int(offset)+len(data) > s.maxValue:
			return nil, Result{Err: ErrTooLarge}
		}
		v := grown(old, int(offset)+len(data))
		copy(v[offset:], data)
		return v, Result{Int: int64(len(v))}
	})
}

func (s *Store) incrByFloat(key, incr []byte) Result {
	return s.update(key, func(old []byte, found bool) ([]byte, Result) {
		d, ok := ParseFloat(incr)
		if !ok {
			return nil, Result{Err: ErrNotFloat}
		}
		x := new(big.Float).SetPrec(longDouble)
		if found {
			if x, ok = ParseFloat(old); !ok {
				return nil, Result{Err: ErrNotFloat}
			}
		}
		if d.IsInf() || x.IsInf() {
			return nil, Result{Err: ErrNaN}
		}
		x.Add(x, d)
		if x.MantExp(nil) > maxLongDoubleExp {
			return nil, Result{Err: ErrNaN}
		}
		v := []byte(FormatFloat(x))
		if len(v) > s.maxValue {
			return nil, Result{Err: ErrTooLarge}
		}
		return v, Result{Val: v}
	})
}

// Redis computes INCRBYFLOAT in C's long double, on amd64 the x87 format,
// with a 64-bit significand and exponents below 2^16384. A big.Float of 64
// bits' precision rounds as it does, and exceeding that exponent is its
// infinity.
const (
	longDouble       = 64
	maxLongDoubleExp = 16384
)

// ParseFloat parses b as Redis parses a float argument (strtold, of
// fewer than 5,120 bytes): decimal or hexadecimal, with an optional
// exponent, or inf; no spaces, and not NaN, nor beyond a long double's
// range. It rounds to a long double's precision.
func ParseFloat(b []byte) (*big.Float, bool) {
	s := string(b)
	if len(s) == 0 || len(s) >= 5<<10 || strings.ContainsAny(s[:1], " \t\n\v\f\r") {
		return nil, false
	}
	unsigned := strings.ToLower(strings.TrimLeft(s, "+-"))
	switch {
	case unsigned == "inf" || unsigned == "infinity":
		return new(big.Float).SetInf(s[0] == '-'), true
	case len(s)-len(unsigned) > 1, strings.HasPrefix(unsigned, "0b"), strings.HasPrefix(unsigned, "0o"):
		return nil, false // strtold takes one sign, and no binary or octal
	}
	x, _, err := new(big.Float).SetPrec(longDouble).Parse(s, 0)
	if err != nil || strings.ContainsRune(s, '_') || x.MantExp(nil) > maxLongDoubleExp {
		return nil, false
	}
	return x, true
}

// FormatFloat formats x as Redis formats an INCRBYFLOAT result: 17 digits
// after the point ("%.17Lf"), then without trailing zeros, nor the point if
// nothing follows it, and "0" for negative zero.
func FormatFloat(x *big.Float) string {
	s := x.Text('f', 17)
	s = strings.TrimRight(s, "0")
	s = strings.TrimSuffix(s, ".")
	if s == "-0" {
		return "0"
	}
	return s
}

// rename moves src's value to dst, replacing any value dst had, unless nx
// and dst exists. Renaming a key to itself changes nothing.
func (s *Store) rename(src, dst []byte, nx bool) Result {
	return s.transfer(src, dst, !nx, true)
}

// copyKey copies src's value to dst, if dst does not exist or replace.
func (s *Store) copyKey(src, dst []byte, replace bool) Result {
	return s.transfer(src, dst, replace, false)
}

// transfer gives dst the value of src, if src exists, and dst does not or
// replace, deleting src if move, under both keys' stripes' locks: RENAME
// and COPY. A missing src is ErrNoSuchKey for a move (Redis's RENAME), and
// not done for a copy.
//
// It is the one place where a key's value goes to another key: whatever
// else a key carries with its value must go with it here. dst gets src's
// deadline, or none if src has none (Redis's RENAME moves the TTL, COPY
// copies it); an expired src or dst is missing.
func (s *Store) transfer(src, dst []byte, replace, move bool) Result {
	ls := s.lockSetOf([][]byte{src, dst}, 1)
	s.lock(ls)
	defer s.unlock(ls)
	now := s.nowMs()
	srcSt, sh := s.locate(src)
	from := srcSt.liveLocked(sh, src, now)
	if from == nil {
		if move {
			return Result{Err: ErrNoSuchKey}
		}
		return Result{}
	}
	dstSt, dh := s.locate(dst)
	to := dstSt.liveLocked(dh, dst, now)
	switch {
	case to != nil && !replace:
		return Result{Found: true}
	case string(src) == string(dst):
		return Result{Done: true, Found: true}
	}
	// Stored values are never modified in place (APPEND's spare capacity
	// aside, which a copy with its capacity cut cannot reach), so both keys
	// may share the bytes.
	val := from.val[:len(from.val):len(from.val)]
	deadline, has := srcSt.deadlineLocked(src)
	if move {
		srcSt.deleteLocked(sh, src)
	}
	dstSt.replaceLocked(to, dh, dst, val)
	dstSt.clearDeadlineLocked(dst)
	if has {
		dstSt.setDeadlineLocked(dst, deadline)
	}
	return Result{Done: true, Found: true}
}
