package store

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/big"
	"testing"
)

// bitModel is a value as a slice of bits, one byte each, that the
// property test below changes and reads one bit at a time.
type bitModel []byte

func (m *bitModel) bit(i uint64) byte {
	if i >= uint64(len(*m)) {
		return 0
	}
	return (*m)[i]
}

func (m *bitModel) setBit(i uint64, b byte) {
	for uint64(len(*m)) <= i {
		*m = append(*m, make([]byte, 8)...)
	}
	(*m)[i] = b
}

func (m bitModel) bytes() []byte {
	out := make([]byte, len(m)/8)
	for i, b := range m {
		out[i/8] |= b << (7 - i%8)
	}
	return out
}

// field reads a bitfield as an exact integer.
func (m *bitModel) field(off uint64, bits uint8, signed bool) *big.Int {
	x := new(big.Int)
	for i := uint64(0); i < uint64(bits); i++ {
		x.Lsh(x, 1)
		x.SetBit(x, 0, uint(m.bit(off+i)))
	}
	if signed && m.bit(off) == 1 {
		x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(bits)))
	}
	return x
}

func (m *bitModel) putField(off uint64, bits uint8, x *big.Int) {
	u := new(big.Int).Mod(x, new(big.Int).Lsh(big.NewInt(1), uint(bits))) // two's complement
	for i := uint64(0); i < uint64(bits); i++ {
		m.setBit(off+i, byte(u.Bit(int(uint64(bits)-1-i))))
	}
}

// bitfieldModel applies op to m with exact arithmetic and Redis's
// documented overflow rules, and returns its reply (nil for a refused one).
func (m *bitModel) bitfieldModel(op BitfieldOp) *big.Int {
	old := m.field(op.Offset, op.Bits, op.Signed)
	if op.Kind == BitfieldGet {
		return old
	}
	lo, hi := big.NewInt(0), new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(op.Bits)), big.NewInt(1))
	if op.Signed {
		hi = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(op.Bits-1)), big.NewInt(1))
		lo = new(big.Int).Neg(new(big.Int).Add(hi, big.NewInt(1)))
	}
	next := new(big.Int).Add(old, big.NewInt(op.Value))
	if op.Kind == BitfieldSet {
		next = big.NewInt(op.Value)
		if !op.Signed {
			next = new(big.Int).SetUint64(uint64(op.Value)) // Redis reads it as unsigned
		}
	}
	need := op.Offset + uint64(op.Bits) // a write grows the value first, even if refused
	m.setBit((need+7)/8*8-1, m.bit((need+7)/8*8-1))
	if next.Cmp(lo) < 0 || next.Cmp(hi) > 0 {
		switch op.Overflow {
		case OverflowFail:
			return nil
		case OverflowSat:
			// Redis (checkSignedBitfieldOverflow) computes hi-value in
			// 64 bits, and a SET of a value so far below lo that this
			// wraps saturates to hi: BITFIELD k OVERFLOW SAT SET i61 96
			// -8646911284551364656 writes 2^60-1.
			wraps := op.Kind == BitfieldSet && op.Signed && op.Bits < 64 &&
				new(big.Int).Sub(hi, next).Cmp(big.NewInt(math.MaxInt64)) > 0
			if next.Cmp(lo) < 0 && !wraps {
				next = lo
			} else {
				next = hi
			}
		}
	}
	m.putField(op.Offset, op.Bits, next)
	if op.Kind == BitfieldSet {
		return old
	}
	return m.field(op.Offset, op.Bits, op.Signed)
}

// FuzzBits runs a sequence of SETBIT, SETRANGE and BITFIELD writes, which
// the input encodes, on one key, against bitModel, and after each checks
// the value, and GETBIT, BITCOUNT and BITPOS over a range the input picks.
func FuzzBits(f *testing.F) {
	f.Add([]byte("\x00\x05\x01\x01\x03\x00abc\x02\x10\x01\x30"))
	f.Add([]byte("\x02\x07\x02\x90\xff\xff\x01\x05\x80\x03"))
	f.Add(bytes.Repeat([]byte{2, 0x3f, 1, 0xf5, 0x7f}, 8))
	f.Fuzz(func(t *testing.T, in []byte) {
		const maxValue = 64
		s := New(Options{Stripes: 1, MaxValue: maxValue})
		var m bitModel
		next := func() uint64 {
			if len(in) == 0 {
				return 0
			}
			b := in[0]
			in = in[1:]
			return uint64(b)
		}
		for steps := 0; len(in) > 0 && steps < 64; steps++ {
			switch next() % 3 {
			case 0:
				off, bit := next()*2, byte(next()&1)
				r := do(t, s, OpSetBit, bit, "k", string(Uint64Arg(off)))
				if off/8 >= maxValue {
					if r.Err != ErrTooLarge {
						t.Fatalf("SETBIT %d past MaxValue: %+v", off, r)
					}
					continue
				}
				if r.Int != int64(m.bit(off)) {
					t.Fatalf("SETBIT %d = %d, model %d", off, r.Int, m.bit(off))
				}
				m.setBit(off, bit)
			case 1:
				off, n := next()%80, next()%8
				data := bytes.Repeat([]byte{byte(next())}, int(n))
				r := do(t, s, OpSetRange, 0, "k", string(Uint64Arg(off)), string(data))
				if n > 0 && off+n > maxValue {
					if r.Err != ErrTooLarge {
						t.Fatalf("SETRANGE %d past MaxValue: %+v", off, r)
					}
					continue
				}
				for i := uint64(0); i < n*8; i++ {
					m.setBit(off*8+i, data[i/8]>>(7-i%8)&1)
				}
			case 2:
				op := BitfieldOp{Kind: byte(next() % 3), Overflow: byte(next() % 3), Offset: next() * 2}
				sb := next()
				op.Signed, op.Bits = sb&1 == 1, uint8(sb>>1%64+1)
				if !op.Signed && op.Bits == 64 {
					op.Bits = 63
				}
				op.Value = int64(next()<<56 | next()<<8 | next())
				if next()&1 == 1 {
					op.Value = -op.Value
				}
				if (op.Offset+uint64(op.Bits)+7)/8 > maxValue && op.Kind != BitfieldGet {
					continue
				}
				got := bitfieldOf(t, s, "k", op)[0]
				want := m.bitfieldModel(op)
				if (want == nil) != (got == "nil") || (want != nil && big.NewInt(got.(int64)).Cmp(want) != 0) {
					t.Fatalf("BITFIELD %+v = %v, model %v", op, got, want)
				}
			}
			v, _ := s.Get([]byte("k"))
			if !bytes.Equal(v, m.bytes()) {
				t.Fatalf("value %x, model %x", v, m.bytes())
			}
			checkBitReads(t, v, m, next()%uint64(8*len(v)+9), next()%uint64(8*len(v)+9))
		}
	})
}

// checkBitReads checks BitOf, BitCount and BitPos of v against m on the
// bits [from, to) of v.
func checkBitReads(t *testing.T, v []byte, m bitModel, from, to uint64) {
	for i := uint64(0); i < uint64(8*len(v))+8; i++ {
		if BitOf(v, i) != m.bit(i) {
			t.Fatalf("BitOf(%d) = %d, model %d", i, BitOf(v, i), m.bit(i))
		}
	}
	to = min(to, uint64(8*len(v)))
	if from > to {
		return
	}
	var count int64
	first := [2]int64{-1, -1}
	for i := from; i < to; i++ {
		b := m.bit(i)
		count += int64(b)
		if first[b] < 0 {
			first[b] = int64(i)
		}
	}
	if got := BitCount(v, from, to); got != count {
		t.Fatalf("BitCount(%d, %d) = %d, model %d", from, to, got, count)
	}
	for bit := range byte(2) {
		if got := BitPos(v, from, to, bit); got != first[bit] {
			t.Fatalf("BitPos(%d, %d, %d) = %d, model %d", from, to, bit, got, first[bit])
		}
	}
}

func TestBitfieldArgRoundTrip(t *testing.T) {
	op := BitfieldOp{Kind: BitfieldIncr, Overflow: OverflowFail, Signed: true, Bits: 17, Offset: 1<<40 + 3, Value: -12345}
	arg := op.Arg()
	if len(arg) != bitfieldArgLen || bitfieldOpOf(arg) != op || !checkBitfieldArgs([][]byte{arg}) {
		t.Fatalf("%+v encodes as %x, which decodes as %+v", op, arg, bitfieldOpOf(arg))
	}
	if binary.BigEndian.Uint64(arg[4:]) != op.Offset {
		t.Fatal("offset not big-endian at byte 4")
	}
}
