package store

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestGetDel(t *testing.T) {
	s := New(Options{Stripes: 4})
	set(t, s, "k", "v")
	if r := do(t, s, OpGetDel, 0, "k"); !r.Found || string(r.Val) != "v" {
		t.Fatalf("GETDEL = %+v", r)
	}
	if r := do(t, s, OpGetDel, 0, "k"); r.Found || r.Val != nil {
		t.Fatalf("GETDEL of a missing key = %+v", r)
	}
	checkSize(t, s, 0, 0)
}

func TestIncrByFloat(t *testing.T) {
	cases := []struct {
		old  string // "" for a missing key
		incr string
		want string
		err  error
	}{
		{"10.5", "0.1", "10.6", nil}, // Redis's long double gives 10.6, a float64 10.600000000000001
		{"", "5.0e3", "5000", nil},
		{"", "-0.0", "0", nil},
		{"3", "0x10", "19", nil},
		{"1", "1.", "2", nil},
		{"1", ".5", "1.5", nil},
		{"", "1e-20", "0", nil}, // 17 digits after the point
		{"5", "-5", "0", nil},
		{"1e300", "1", "1000000000000000000008997324079559193870523944273290747938260082321265646596180935755849152083750497190350372508614274835903592556184672983913096260520748646287327135641843653294084255107606016789726652932370030551382947620994540294772781889620606179267611627097410650567187386105690089424915104006144", nil},
		{"abc", "1", "", ErrNotFloat},
		{"empty", "1", "", ErrNotFloat},
		{"1", "abc", "", ErrNotFloat},
		{"1", " 1", "", ErrNotFloat},
		{"1", "1 ", "", ErrNotFloat},
		{"1", "nan", "", ErrNotFloat},
		{"1", "0b1", "", ErrNotFloat},
		{"1", "--1", "", ErrNotFloat},
		{"1", "1e5000", "", ErrNotFloat},
		{"1", strings.Repeat("0", 5119), "1", nil},
		{"1", strings.Repeat("0", 5120), "", ErrNotFloat}, // Redis's longest float is 5,119 bytes
		{"1", "inf", "", ErrNaN},
		{"inf", "1", "", ErrNaN},
		{"1e4932", "1e4932", "", ErrNaN},
	}
	for _, tc := range cases {
		s := New(Options{Stripes: 1})
		switch tc.old {
		case "":
		case "empty":
			set(t, s, "k", "")
		default:
			set(t, s, "k", tc.old)
		}
		before := value(s, "k")
		r := do(t, s, OpIncrByFloat, 0, "k", tc.incr)
		if !errors.Is(r.Err, tc.err) || (tc.err == nil && (string(r.Val) != tc.want || value(s, "k") != tc.want)) {
			t.Errorf("%q + %q = %q (stored %q), %v; want %q, %v", tc.old, tc.incr, r.Val, value(s, "k"), r.Err, tc.want, tc.err)
		}
		if tc.err != nil && value(s, "k") != before {
			t.Errorf("%q + %q failed but changed the value to %q", tc.old, tc.incr, value(s, "k"))
		}
	}
}

func TestSetRange(t *testing.T) {
	s := New(Options{Stripes: 4, MaxValue: 16})
	if r := do(t, s, OpSetRange, 0, "k", string(Uint64Arg(3)), ""); r.Int != 0 || value(s, "k") != "<missing>" {
		t.Fatalf("SETRANGE of nothing on a missing key = %+v, created %q", r, value(s, "k"))
	}
	if r := do(t, s, OpSetRange, 0, "k", string(Uint64Arg(3)), "abc"); r.Int != 6 || value(s, "k") != "\x00\x00\x00abc" {
		t.Fatalf("SETRANGE padded = %+v, %q", r, value(s, "k"))
	}
	snap := s.Snapshot()
	if r := do(t, s, OpSetRange, 0, "k", string(Uint64Arg(1)), "Z"); r.Int != 6 || value(s, "k") != "\x00Z\x00abc" {
		t.Fatalf("SETRANGE inside = %+v, %q", r, value(s, "k"))
	}
	if got := pairs(snap); !slices.Equal(got, []string{"k=\x00\x00\x00abc"}) {
		t.Fatalf("a snapshot taken before SETRANGE sees %q: the value changed in place", got)
	}
	if r := do(t, s, OpSetRange, 0, "k", string(Uint64Arg(9)), ""); r.Int != 6 {
		t.Fatalf("SETRANGE of nothing = %+v, want the length", r)
	}
	for _, off := range []uint64{14, 1 << 40, 1<<64 - 1} {
		if r := do(t, s, OpSetRange, 0, "k", string(Uint64Arg(off)), "abc"); r.Err != ErrTooLarge || value(s, "k") != "\x00Z\x00abc" {
			t.Fatalf("SETRANGE at %d past MaxValue = %+v, %q", off, r, value(s, "k"))
		}
	}
}

func TestRenameCopy(t *testing.T) {
	s := New(Options{Stripes: 8})
	set(t, s, "a", "1")
	set(t, s, "b", "2")
	if r := do(t, s, OpRename, 0, "a", "c"); !r.Done || r.Err != nil || value(s, "a") != "<missing>" || value(s, "c") != "1" {
		t.Fatalf("RENAME a c = %+v", r)
	}
	if r := do(t, s, OpRename, 0, "a", "c"); r.Err != ErrNoSuchKey {
		t.Fatalf("RENAME of a missing key = %+v", r)
	}
	if r := do(t, s, OpRename, RenameNX, "a", "x"); r.Err != ErrNoSuchKey {
		t.Fatalf("RENAMENX of a missing key = %+v", r)
	}
	if r := do(t, s, OpRename, RenameNX, "c", "b"); r.Done || value(s, "b") != "2" || value(s, "c") != "1" {
		t.Fatalf("RENAMENX onto an existing key = %+v", r)
	}
	if r := do(t, s, OpRename, 0, "c", "b"); !r.Done || value(s, "b") != "1" || value(s, "c") != "<missing>" {
		t.Fatalf("RENAME onto an existing key = %+v", r)
	}
	if r := do(t, s, OpRename, 0, "b", "b"); !r.Done || value(s, "b") != "1" {
		t.Fatalf("RENAME b b = %+v", r)
	}
	if r := do(t, s, OpRename, RenameNX, "b", "b"); r.Done || value(s, "b") != "1" {
		t.Fatalf("RENAMENX b b = %+v", r)
	}
	checkSize(t, s, 1, 2)

	// An APPEND leaves b's value room to grow in place, which its copies
	// must not share.
	do(t, s, OpSet, 0, "b", "")
	do(t, s, OpAppend, 0, "b", "1")
	if r := do(t, s, OpCopy, 0, "b", "d"); !r.Done || value(s, "d") != "1" || value(s, "b") != "1" {
		t.Fatalf("COPY b d = %+v", r)
	}
	set(t, s, "e", "old")
	if r := do(t, s, OpCopy, 0, "b", "e"); r.Done || value(s, "e") != "old" {
		t.Fatalf("COPY onto an existing key = %+v", r)
	}
	if r := do(t, s, OpCopy, CopyReplace, "b", "e"); !r.Done || value(s, "e") != "1" {
		t.Fatalf("COPY REPLACE = %+v", r)
	}
	if r := do(t, s, OpCopy, 0, "missing", "f"); r.Done || r.Err != nil || value(s, "f") != "<missing>" {
		t.Fatalf("COPY of a missing key = %+v", r)
	}
	// The keys share the value's bytes: appending to either must not
	// change the other.
	do(t, s, OpAppend, 0, "b", "xyz")
	do(t, s, OpAppend, 0, "d", "uvw")
	if value(s, "b") != "1xyz" || value(s, "d") != "1uvw" || value(s, "e") != "1" {
		t.Fatalf("after APPENDs to copies: b %q, d %q, e %q", value(s, "b"), value(s, "d"), value(s, "e"))
	}
	checkSize(t, s, 3, 3+4+4+1)
}

func TestSetBitBitOp(t *testing.T) {
	s := New(Options{Stripes: 4, MaxValue: 8})
	if r := do(t, s, OpSetBit, 1, "b", string(Uint64Arg(7))); r.Int != 0 || value(s, "b") != "\x01" {
		t.Fatalf("SETBIT 7 1 = %+v, %q", r, value(s, "b"))
	}
	if r := do(t, s, OpSetBit, 1, "b", string(Uint64Arg(8))); r.Int != 0 || value(s, "b") != "\x01\x80" {
		t.Fatalf("SETBIT 8 1 = %+v, %q", r, value(s, "b"))
	}
	if r := do(t, s, OpSetBit, 0, "b", string(Uint64Arg(7))); r.Int != 1 || value(s, "b") != "\x00\x80" {
		t.Fatalf("SETBIT 7 0 = %+v, %q", r, value(s, "b"))
	}
	if r := do(t, s, OpSetBit, 1, "b", string(Uint64Arg(64))); r.Err != ErrTooLarge {
		t.Fatalf("SETBIT past MaxValue = %+v", r)
	}
	set(t, s, "f1", "foo")
	set(t, s, "f2", "bar")
	for _, tc := range []struct {
		op   byte
		srcs []string
		want string
	}{
		{BitAnd, []string{"f1", "f2"}, "bab"},
		{BitOr, []string{"f1", "f2", "missing"}, "fo\x7f"},
		{BitXor, []string{"f1", "missing"}, "foo"},
		{BitNot, []string{"f1"}, "\x99\x90\x90"},
		{BitAnd, []string{"f1", "b"}, "\x00\x00\x00"},
	} {
		r := do(t, s, OpBitOp, tc.op, append([]string{"dest"}, tc.srcs...)...)
		if r.Int != int64(len(tc.want)) || value(s, "dest") != tc.want {
			t.Errorf("BITOP %d %v = %+v, %q; want %q", tc.op, tc.srcs, r, value(s, "dest"), tc.want)
		}
	}
	if r := do(t, s, OpBitOp, BitAnd, "dest", "missing", "missing2"); r.Int != 0 || value(s, "dest") != "<missing>" {
		t.Fatalf("BITOP of missing keys = %+v, dest %q", r, value(s, "dest"))
	}
	if r := do(t, s, OpBitOp, BitOr, "f1", "f1", "f2"); r.Int != 3 || value(s, "f1") != "fo\x7f" {
		t.Fatalf("BITOP into a source = %+v, %q", r, value(s, "f1"))
	}
}

// bitfieldOf applies a BITFIELD and returns its replies, "nil" for a nil.
func bitfieldOf(t *testing.T, s *Store, key string, ops ...BitfieldOp) []any {
	t.Helper()
	args := []string{key}
	for _, op := range ops {
		args = append(args, string(op.Arg()))
	}
	r := do(t, s, OpBitField, 0, args...)
	if r.Err != nil {
		t.Fatalf("BITFIELD: %v", r.Err)
	}
	var out []any
	for i := range ops {
		if x, ok := BitfieldReply(r.Val, i); ok {
			out = append(out, x)
		} else {
			out = append(out, "nil")
		}
	}
	return out
}

// TestBitfield checks BITFIELDs whose replies redis-server 7.0.15 gave.
func TestBitfield(t *testing.T) {
	s := New(Options{Stripes: 4})
	u8 := BitfieldOp{Bits: 8}
	i8 := BitfieldOp{Bits: 8, Signed: true, Offset: 8}
	with := func(op BitfieldOp, kind, overflow byte, v int64) BitfieldOp {
		op.Kind, op.Overflow, op.Value = kind, overflow, v
		return op
	}
	cases := []struct {
		ops  []BitfieldOp
		want []any
	}{
		{[]BitfieldOp{with(u8, BitfieldSet, OverflowWrap, 255), u8}, []any{int64(0), int64(255)}},
		{[]BitfieldOp{with(u8, BitfieldIncr, OverflowWrap, 10), with(u8, BitfieldIncr, OverflowSat, 300), with(u8, BitfieldIncr, OverflowFail, 1)},
			[]any{int64(9), int64(255), "nil"}},
		{[]BitfieldOp{with(i8, BitfieldSet, OverflowWrap, -100), i8, with(i8, BitfieldIncr, OverflowWrap, -100), with(i8, BitfieldIncr, OverflowSat, -100)},
			[]any{int64(0), int64(-100), int64(56), int64(-44)}},
		{[]BitfieldOp{with(BitfieldOp{Bits: 64, Signed: true, Offset: 16}, BitfieldSet, OverflowWrap, -1),
			with(BitfieldOp{Bits: 64, Signed: true, Offset: 16}, BitfieldIncr, OverflowWrap, -9223372036854775807),
			with(BitfieldOp{Bits: 64, Signed: true, Offset: 16}, BitfieldIncr, OverflowWrap, -100)},
			[]any{int64(0), int64(-9223372036854775808), int64(9223372036854775708)}},
		{[]BitfieldOp{with(BitfieldOp{Bits: 63, Offset: 100}, BitfieldSet, OverflowWrap, -1), {Bits: 63, Offset: 100}},
			[]any{int64(0), int64(9223372036854775807)}},
		{[]BitfieldOp{with(BitfieldOp{Bits: 3, Offset: 7}, BitfieldSet, OverflowSat, -10), with(BitfieldOp{Bits: 3, Signed: true, Offset: 9}, BitfieldIncr, OverflowSat, -300)},
			[]any{int64(7), int64(-4)}},
	}
	for i, tc := range cases {
		if got := bitfieldOf(t, s, "bf", tc.ops...); !slices.Equal(got, tc.want) {
			t.Errorf("case %d: BITFIELD = %v, want %v", i, got, tc.want)
		}
	}
	// Only GETs: nothing is created. A refused write still creates the key.
	bitfieldOf(t, s, "g", BitfieldOp{Bits: 8})
	if value(s, "g") != "<missing>" {
		t.Fatal("BITFIELD GET created its key")
	}
	if got := bitfieldOf(t, s, "f", with(u8, BitfieldSet, OverflowFail, 1000)); !slices.Equal(got, []any{"nil"}) || value(s, "f") != "\x00" {
		t.Fatalf("BITFIELD OVERFLOW FAIL SET = %v, key %q", got, value(s, "f"))
	}
}

func TestBadKeyspaceEntry(t *testing.T) {
	cases := map[string][]byte{
		"GETDEL no key":      entryOf(OpGetDel, 0),
		"INCRBYFLOAT 1 arg":  entryOf(OpIncrByFloat, 0, "k"),
		"SETRANGE short off": entryOf(OpSetRange, 0, "k", "1234", "v"),
		"SETBIT bit 2":       entryOf(OpSetBit, 2, "k", string(Uint64Arg(1))),
		"BITOP no source":    entryOf(OpBitOp, BitAnd, "d"),
		"BITOP bad op":       entryOf(OpBitOp, 9, "d", "s"),
		"BITOP NOT 2":        entryOf(OpBitOp, BitNot, "d", "s", "t"),
		"BITFIELD short op":  entryOf(OpBitField, 0, "k", "abc"),
		"BITFIELD u64":       entryOf(OpBitField, 0, "k", string(BitfieldOp{Bits: 64}.Arg())),
		"BITFIELD 0 bits":    entryOf(OpBitField, 0, "k", string(BitfieldOp{Signed: true}.Arg())),
		"RENAME 1 arg":       entryOf(OpRename, 0, "k"),
		"COPY 3 args":        entryOf(OpCopy, 0, "a", "b", "c"),
		"op 48":              entryOf(48, 0, "k"),
	}
	for name, e := range cases {
		s := New(Options{Stripes: 2})
		set(t, s, "k", "v")
		if _, err := s.Apply(e); !errors.Is(err, ErrBadEntry) {
			t.Errorf("%s: Apply error %v, want ErrBadEntry", name, err)
		}
		if value(s, "k") != "v" || s.Len() != 1 {
			t.Errorf("%s: a rejected entry changed the store", name)
		}
	}
}

// TestKeyspaceReplay applies one batch of every keyspace op to two stores
// with different stripes (and hash seeds): they must end the same, as
// replicas replaying a log do.
func TestKeyspaceReplay(t *testing.T) {
	var b Batch
	add := func(op Op, flags byte, args ...string) {
		bs := make([][]byte, len(args))
		for i, a := range args {
			bs[i] = []byte(a)
		}
		b.Add(op, flags, bs...)
	}
	add(OpSet, 0, "a", "1.5")
	add(OpIncrByFloat, 0, "a", "0.1")
	add(OpSetRange, 0, "b", string(Uint64Arg(2)), "xy")
	add(OpSetBit, 1, "c", string(Uint64Arg(13)))
	add(OpBitOp, BitXor, "d", "b", "c")
	add(OpBitField, 0, "e", string(BitfieldOp{Kind: BitfieldIncr, Bits: 5, Offset: 3, Value: 40}.Arg()))
	add(OpRename, 0, "a", "f")
	add(OpCopy, 0, "f", "g")
	add(OpGetDel, 0, "b")
	var want []string
	for _, stripes := range []int{1, 16} {
		s := New(Options{Stripes: stripes})
		if err := s.ApplyBatch(b.Bytes(), nil); err != nil {
			t.Fatal(err)
		}
		got := pairs(s.Snapshot())
		if want == nil {
			want = got
		} else if !slices.Equal(got, want) {
			t.Fatalf("replay with %d stripes gave %q, want %q", stripes, got, want)
		}
	}
	if !slices.Equal(want, []string{"c=\x00\x04", "d=\x00\x04xy", "e=\x08", "f=1.6", "g=1.6"}) {
		t.Fatalf("replay gave %q", want)
	}
}
