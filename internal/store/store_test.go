package store

import (
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// do applies one command and fails the test if the entry is rejected.
func do(tb testing.TB, s *Store, op Op, flags byte, args ...string) Result {
	tb.Helper()
	r, err := s.Apply(entryOf(op, flags, args...))
	if err != nil {
		tb.Fatalf("Apply(op %d %q): %v", op, args, err)
	}
	return r
}

func entryOf(op Op, flags byte, args ...string) []byte {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	return AppendEntry(nil, op, flags, bs...)
}

func set(tb testing.TB, s *Store, key, val string) { tb.Helper(); do(tb, s, OpSet, 0, key, val) }

func incrBy(tb testing.TB, s *Store, key string, delta int64) Result {
	tb.Helper()
	return do(tb, s, OpIncrBy, 0, key, string(DeltaArg(delta)))
}

// value returns key's value as a string, and "<missing>" for a missing key.
func value(s *Store, key string) string {
	v, ok := s.Get([]byte(key))
	if !ok {
		return "<missing>"
	}
	return string(v)
}

// pairs returns the snapshot's pairs in order as "key=value" strings.
func pairs(sn *Snapshot) []string {
	var out []string
	sn.Ascend(func(k string, v []byte) bool {
		out = append(out, k+"="+string(v))
		return true
	})
	return out
}

func checkSize(tb testing.TB, s *Store, keys, bytes int64) {
	tb.Helper()
	if s.Len() != keys || s.Bytes() != bytes {
		tb.Fatalf("Len, Bytes = %d, %d; want %d, %d", s.Len(), s.Bytes(), keys, bytes)
	}
}

func TestSet(t *testing.T) {
	for _, tc := range []struct {
		name     string
		flags    byte
		existing bool
		done     bool
		val      string // Result.Val; "" for nil
		after    string
	}{
		{"plain missing", 0, false, true, "", "new"},
		{"plain existing", 0, true, true, "", "new"},
		{"NX missing", SetNX, false, true, "", "new"},
		{"NX existing", SetNX, true, false, "", "old"},
		{"XX missing", SetXX, false, false, "", "<missing>"},
		{"XX existing", SetXX, true, true, "", "new"},
		{"GET missing", SetGet, false, true, "", "new"},
		{"GET existing", SetGet, true, true, "old", "new"},
		{"NX GET existing", SetNX | SetGet, true, false, "old", "old"},
		{"NX GET missing", SetNX | SetGet, false, true, "", "new"},
		{"XX GET existing", SetXX | SetGet, true, true, "old", "new"},
		{"XX GET missing", SetXX | SetGet, false, false, "", "<missing>"},
		{"NX XX missing", SetNX | SetXX, false, false, "", "<missing>"},
		{"NX XX existing", SetNX | SetXX, true, false, "", "old"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{})
			if tc.existing {
				set(t, s, "k", "old")
			}
			r := do(t, s, OpSet, tc.flags, "k", "new")
			if r.Done != tc.done || r.Found != tc.existing || string(r.Val) != tc.val || r.Err != nil {
				t.Errorf("Result = %+v; want Done %v, Found %v, Val %q", r, tc.done, tc.existing, tc.val)
			}
			if tc.val == "" && r.Val != nil {
				t.Errorf("Val = %q, want nil", r.Val)
			}
			if got := value(s, "k"); got != tc.after {
				t.Errorf("value after = %q, want %q", got, tc.after)
			}
		})
	}
}

// TestSetGetEmptyValue tells an empty old value from a missing one.
func TestSetGetEmptyValue(t *testing.T) {
	s := New(Options{})
	set(t, s, "k", "")
	r := do(t, s, OpSet, SetGet, "k", "v")
	if !r.Found || r.Val == nil || len(r.Val) != 0 {
		t.Fatalf("Result = %+v, want Found and an empty non-nil Val", r)
	}
}

func TestMSet(t *testing.T) {
	s := New(Options{})
	set(t, s, "b", "old")
	if r := do(t, s, OpMSet, 0, "a", "1", "b", "2", "c", "3"); !r.Done {
		t.Fatalf("MSET Done = false")
	}
	if got := pairs(s.Snapshot()); !slices.Equal(got, []string{"a=1", "b=2", "c=3"}) {
		t.Fatalf("after MSET: %q", got)
	}
	// A repeated key takes its last value and counts once.
	do(t, s, OpMSet, 0, "x", "1", "x", "2")
	if got := value(s, "x"); got != "2" {
		t.Fatalf("x = %q, want 2", got)
	}
	checkSize(t, s, 4, 4*2)
}

func TestMSetNX(t *testing.T) {
	s := New(Options{})
	if r := do(t, s, OpMSetNX, 0, "a", "1", "b", "2"); !r.Done {
		t.Fatal("MSETNX on missing keys: Done = false")
	}
	// One existing key stops every write, including those before it.
	if r := do(t, s, OpMSetNX, 0, "c", "3", "b", "x", "d", "4"); r.Done {
		t.Fatal("MSETNX with an existing key: Done = true")
	}
	if got := pairs(s.Snapshot()); !slices.Equal(got, []string{"a=1", "b=2"}) {
		t.Fatalf("after a failed MSETNX: %q, want a=1 b=2", got)
	}
	checkSize(t, s, 2, 4)
	if r := do(t, s, OpMSetNX, 0, "c", "3", "c", "4"); !r.Done || value(s, "c") != "4" {
		t.Fatalf("MSETNX c 3 c 4: Done %v, c = %q; want true, 4", r.Done, value(s, "c"))
	}
}

func TestDel(t *testing.T) {
	s := New(Options{})
	do(t, s, OpMSet, 0, "a", "1", "b", "2", "c", "3")
	for _, tc := range []struct {
		keys []string
		want int64
	}{
		{[]string{"missing"}, 0},
		{[]string{"a", "missing", "b"}, 2},
		{[]string{"a", "b"}, 0},
		{[]string{"c", "c"}, 1}, // a repeated key is removed once
	} {
		if r := do(t, s, OpDel, 0, tc.keys...); r.Int != tc.want {
			t.Errorf("DEL %q = %d, want %d", tc.keys, r.Int, tc.want)
		}
	}
	checkSize(t, s, 0, 0)
}

func TestIncrBy(t *testing.T) {
	s := New(Options{})
	if r := incrBy(t, s, "n", 5); r.Int != 5 || r.Err != nil {
		t.Fatalf("INCRBY on a missing key = %+v, want 5", r)
	}
	if r := incrBy(t, s, "n", -8); r.Int != -3 || value(s, "n") != "-3" {
		t.Fatalf("INCRBY -8 = %+v, value %q; want -3", r, value(s, "n"))
	}
	for _, tc := range []struct {
		start string
		delta int64
		want  int64
		err   error
	}{
		{"0", 0, 0, nil},
		{"-9223372036854775808", 0, -1 << 63, nil},
		{"9223372036854775806", 1, 1<<63 - 1, nil},
		{"9223372036854775807", 1, 0, ErrOverflow},
		{"9223372036854775807", -1 << 63, -1, nil},
		{"-9223372036854775807", -1, -1 << 63, nil},
		{"-9223372036854775808", -1, 0, ErrOverflow},
		{"-9223372036854775808", 1<<63 - 1, -1, nil},
		{"0", -1 << 63, -1 << 63, nil},
		{"1", 1<<63 - 1, 0, ErrOverflow},
		{"-2", -1<<63 + 1, 0, ErrOverflow},
		{"abc", 1, 0, ErrNotInteger},
		{"", 1, 0, ErrNotInteger},
		{" 1", 1, 0, ErrNotInteger},
		{"1 ", 1, 0, ErrNotInteger},
		{"+1", 1, 0, ErrNotInteger},
		{"01", 1, 0, ErrNotInteger},
		{"-0", 1, 0, ErrNotInteger},
		{"1.5", 1, 0, ErrNotInteger},
		{"0x10", 1, 0, ErrNotInteger},
		{"9223372036854775808", -1, 0, ErrNotInteger},
		{"-9223372036854775809", 1, 0, ErrNotInteger},
		{"99999999999999999999", -1, 0, ErrNotInteger},
		{"123456789012345678901", -1, 0, ErrNotInteger},
	} {
		set(t, s, "k", tc.start)
		r := incrBy(t, s, "k", tc.delta)
		if r.Err != tc.err || (tc.err == nil && r.Int != tc.want) {
			t.Errorf("%q INCRBY %d = %d, %v; want %d, %v", tc.start, tc.delta, r.Int, r.Err, tc.want, tc.err)
		}
		want := tc.start // an error changes nothing
		if tc.err == nil {
			want = strconv.FormatInt(tc.want, 10)
		}
		if got := value(s, "k"); got != want {
			t.Errorf("%q INCRBY %d left %q, want %q", tc.start, tc.delta, got, want)
		}
	}
}

func TestAppend(t *testing.T) {
	s := New(Options{MaxValue: 8})
	if r := do(t, s, OpAppend, 0, "k", "abc"); r.Int != 3 || r.Err != nil {
		t.Fatalf("APPEND to a missing key = %+v, want 3", r)
	}
	if r := do(t, s, OpAppend, 0, "k", "def"); r.Int != 6 || value(s, "k") != "abcdef" {
		t.Fatalf("APPEND = %+v, value %q; want 6, abcdef", r, value(s, "k"))
	}
	if r := do(t, s, OpAppend, 0, "k", "xyz"); r.Err != ErrTooLarge {
		t.Fatalf("APPEND past MaxValue = %+v, want ErrTooLarge", r)
	}
	if got := value(s, "k"); got != "abcdef" {
		t.Fatalf("a failed APPEND left %q", got)
	}
	if r := do(t, s, OpAppend, 0, "k", "gh"); r.Int != 8 || r.Err != nil || value(s, "k") != "abcdefgh" {
		t.Fatalf("APPEND up to MaxValue = %+v, value %q; want 8", r, value(s, "k"))
	}
	if r := do(t, s, OpAppend, 0, "new", "123456789"); r.Err != ErrTooLarge || value(s, "new") != "<missing>" {
		t.Fatalf("APPEND of a too long suffix to a missing key = %+v, value %q", r, value(s, "new"))
	}
	// Appending nothing to a missing key creates it empty, as in Redis.
	if r := do(t, s, OpAppend, 0, "empty", ""); r.Int != 0 || s.Exists([][]byte{[]byte("empty")}) != 1 {
		t.Fatalf("APPEND empty = %+v, exists %d; want 0, 1", r, s.Exists([][]byte{[]byte("empty")}))
	}
	checkSize(t, s, 2, 1+8+5)
}

// TestAppendInPlace checks that an APPEND that grows a value in its spare
// capacity changes no value already handed out: not one returned by Get or
// by SET GET, and not one in a snapshot.
func TestAppendInPlace(t *testing.T) {
	s := New(Options{})
	for range 5 {
		do(t, s, OpAppend, 0, "k", "ab") // grows with spare capacity
	}
	got, _ := s.Get([]byte("k"))
	sn := s.Snapshot()
	for i := range 5 {
		do(t, s, OpAppend, 0, "k", strconv.Itoa(i))
	}
	if string(got) != "ababababab" {
		t.Errorf("value from Get became %q", got)
	}
	if p := pairs(sn); !slices.Equal(p, []string{"k=ababababab"}) {
		t.Errorf("snapshot became %q", p)
	}
	// The same holds for a value read between two rounds of appends.
	cur, _ := s.Get([]byte("k"))
	do(t, s, OpAppend, 0, "k", "!")
	if string(cur) != "ababababab01234" || value(s, "k") != "ababababab01234!" {
		t.Errorf("value from Get became %q, store has %q", cur, value(s, "k"))
	}
}

func TestCAS(t *testing.T) {
	s := New(Options{})
	if r := do(t, s, OpCAS, 0, "k", "", "v"); r.Done || r.Found || value(s, "k") != "<missing>" {
		t.Fatalf("CAS on a missing key = %+v, value %q", r, value(s, "k"))
	}
	set(t, s, "k", "a")
	if r := do(t, s, OpCAS, 0, "k", "b", "c"); r.Done || !r.Found || value(s, "k") != "a" {
		t.Fatalf("CAS with a wrong expected value = %+v, value %q", r, value(s, "k"))
	}
	if r := do(t, s, OpCAS, 0, "k", "a", "c"); !r.Done || !r.Found || value(s, "k") != "c" {
		t.Fatalf("CAS with the right expected value = %+v, value %q", r, value(s, "k"))
	}
	set(t, s, "e", "")
	if r := do(t, s, OpCAS, 0, "e", "", "full"); !r.Done || value(s, "e") != "full" {
		t.Fatalf("CAS on an empty value = %+v, value %q", r, value(s, "e"))
	}
	checkSize(t, s, 2, 2+5)
}

func TestFlush(t *testing.T) {
	s := New(Options{Stripes: 4})
	do(t, s, OpMSet, 0, "a", "1", "b", "2", "c", "3")
	sn := s.Snapshot()
	if r := do(t, s, OpFlush, 0); !r.Done {
		t.Fatal("FLUSH Done = false")
	}
	checkSize(t, s, 0, 0)
	if value(s, "a") != "<missing>" || len(pairs(s.Snapshot())) != 0 {
		t.Fatalf("after FLUSH: %q", pairs(s.Snapshot()))
	}
	if p := pairs(sn); !slices.Equal(p, []string{"a=1", "b=2", "c=3"}) {
		t.Fatalf("snapshot from before FLUSH: %q", p)
	}
	set(t, s, "a", "new")
	checkSize(t, s, 1, 4)
}

// TestApplyDoesNotRetainEntry overwrites each entry after applying it: the
// stored values must be copies.
func TestApplyDoesNotRetainEntry(t *testing.T) {
	s := New(Options{})
	for _, e := range [][]byte{
		entryOf(OpSet, 0, "a", "val"),
		entryOf(OpMSet, 0, "b", "val", "c", "val"),
		entryOf(OpMSetNX, 0, "d", "val"),
		entryOf(OpAppend, 0, "e", "val"),
		entryOf(OpSet, 0, "f", "xxx"),
		entryOf(OpCAS, 0, "f", "xxx", "val"),
	} {
		if _, err := s.Apply(e); err != nil {
			t.Fatal(err)
		}
		for i := range e {
			e[i] = '#'
		}
	}
	want := []string{"a=val", "b=val", "c=val", "d=val", "e=val", "f=val"}
	if got := pairs(s.Snapshot()); !slices.Equal(got, want) {
		t.Fatalf("after overwriting the entries: %q, want %q", got, want)
	}
}

// TestRetain applies entries with Retain on: the store keeps slices of
// them, and an APPEND to a retained value writes to new memory, never into
// the entry after the value.
func TestRetain(t *testing.T) {
	s := New(Options{})
	s.Retain(true)
	e := append(make([]byte, 0, 64), entryOf(OpSet, 0, "k", "val")...) // with room after it
	if _, err := s.Apply(e); err != nil {
		t.Fatal(err)
	}
	v, _ := s.Get([]byte("k"))
	if &v[0] != &e[len(e)-3] {
		t.Fatal("with Retain on, the stored value is a copy")
	}
	tail := append(e, "after"...)[len(e):]
	s.Retain(false)
	do(t, s, OpAppend, 0, "k", "XYZ")
	if string(tail) != "after" || value(s, "k") != "valXYZ" {
		t.Fatalf("APPEND to a retained value: bytes after it %q, value %q", tail, value(s, "k"))
	}
}

// TestPutReserve loads pairs with Put into a reserved store, a key twice
// among them: the table, the index and the counts agree.
func TestPutReserve(t *testing.T) {
	s := New(Options{Stripes: 4})
	s.Reserve(1000)
	buf := []byte(strings.Repeat("v", 2000)) // values side by side, as in a mapped file
	for i := range 1000 {
		s.Put(fmt.Appendf(nil, "k%04d", i), buf[2*i:2*i+2])
	}
	s.Put([]byte("k0007"), []byte("longer"))
	checkSize(t, s, 1000, 1000*7+4)
	if v := value(s, "k0007"); v != "longer" {
		t.Fatalf("k0007 = %q after a second Put, want longer", v)
	}
	ps := pairs(s.Snapshot())
	if len(ps) != 1000 || ps[7] != "k0007=longer" || ps[999] != "k0999=vv" {
		t.Fatalf("the index holds %d pairs, [7] %q, [999] %q", len(ps), ps[7], ps[999])
	}
	do(t, s, OpAppend, 0, "k0001", "x") // Put cut the value's capacity: APPEND copies it
	if value(s, "k0001") != "vvx" || value(s, "k0002") != "vv" {
		t.Fatalf("APPEND after Put: %q, %q", value(s, "k0001"), value(s, "k0002"))
	}
}

func TestLenBytes(t *testing.T) {
	s := New(Options{})
	steps := []struct {
		op           Op
		flags        byte
		args         []string
		keys, nbytes int64
	}{
		{OpSet, 0, []string{"k", "vv"}, 1, 3},
		{OpSet, 0, []string{"k", "v"}, 1, 2},
		{OpSet, SetNX, []string{"k", "longer"}, 1, 2},
		{OpSet, 0, []string{"kk", ""}, 2, 4},
		{OpAppend, 0, []string{"kk", "abc"}, 2, 7},
		{OpIncrBy, 0, []string{"n", string(DeltaArg(100))}, 3, 11},
		{OpIncrBy, 0, []string{"n", string(DeltaArg(-101))}, 3, 10},
		{OpMSet, 0, []string{"k", "12345", "m", ""}, 4, 15},
		{OpMSetNX, 0, []string{"z", "1", "m", "1"}, 4, 15},
		{OpCAS, 0, []string{"m", "", "xy"}, 4, 17},
		{OpDel, 0, []string{"k", "nope"}, 3, 11},
		{OpDel, 0, []string{"kk", "n", "m"}, 0, 0},
		{OpSet, 0, []string{"", ""}, 1, 0},
		{OpSet, 0, []string{"a", "b"}, 2, 2},
		{OpFlush, 0, nil, 0, 0},
	}
	for i, st := range steps {
		do(t, s, st.op, st.flags, st.args...)
		if s.Len() != st.keys || s.Bytes() != st.nbytes {
			t.Fatalf("step %d (op %d %q): Len, Bytes = %d, %d; want %d, %d",
				i, st.op, st.args, s.Len(), s.Bytes(), st.keys, st.nbytes)
		}
	}
}

func TestExistsMGet(t *testing.T) {
	s := New(Options{Stripes: 4})
	do(t, s, OpMSet, 0, "a", "1", "b", "", "c", "3")
	keys := func(ks ...string) [][]byte {
		var out [][]byte
		for _, k := range ks {
			out = append(out, []byte(k))
		}
		return out
	}
	if n := s.Exists(keys("a", "x", "a", "b")); n != 3 {
		t.Errorf("Exists(a x a b) = %d, want 3 (a repeated key counts each time)", n)
	}
	if n := s.Exists(nil); n != 0 {
		t.Errorf("Exists() = %d", n)
	}
	for _, ks := range [][]string{{"b"}, {"x"}, {"c", "x", "a", "b", "c"}, {}} {
		var got []string
		s.MGet(keys(ks...), func(i int, v []byte, found bool) {
			if i != len(got) {
				t.Errorf("MGet %q: called with i=%d after %d calls", ks, i, len(got))
			}
			if !found {
				got = append(got, "<missing>")
				if v != nil {
					t.Errorf("MGet %q: missing key %d has value %q", ks, i, v)
				}
				return
			}
			got = append(got, string(v))
		})
		var want []string
		for _, k := range ks {
			want = append(want, value(s, k))
		}
		if !slices.Equal(got, want) {
			t.Errorf("MGet %q = %q, want %q", ks, got, want)
		}
	}
}

// TestRange checks Range, Count and Ascend against a sorted list of keys
// spread over four stripes, so that each read merges their indexes.
func TestRange(t *testing.T) {
	s := New(Options{Stripes: 4})
	var all []string
	for i := 0; i < 3000; i += 3 {
		all = append(all, fmt.Sprintf("k%05d", i))
	}
	all = append(all, "", "\x00", "k\xff", "\xff\xff")
	for _, k := range all {
		set(t, s, k, "v"+k)
	}
	slices.Sort(all)
	for _, tc := range []struct {
		start, end string
		limit      int
	}{
		{"", "\xff\xff", 0},
		{"", "\xff\xff\xff", -1},
		{"k00003", "k00009", 0},     // both ends are keys: inclusive
		{"k00004", "k00008", 0},     // neither end is a key
		{"k00003", "k00003", 0},     // one key
		{"k00004", "k00004", 0},     // no key
		{"k00009", "k00003", 0},     // start > end
		{"k00009", "k00003", 5},     // start > end with a limit
		{"k", "k\xff", 0},           // every k key and "k\xff"
		{"k00100", "k02000", 1},     // limit 1
		{"k00100", "k02000", 100},   // limit 100
		{"k00100", "k00130", 100},   // limit larger than the range
		{"", "", 0},                 // the empty key
		{"\x00", "\x00", 0},         // a binary key
		{"k02990", "\xff\xff", 3},   // the last keys
		{"\xff\xff\xff", "\xff", 0}, // start > end beyond every key
	} {
		var want []string
		for _, k := range all {
			if tc.start <= k && k <= tc.end && (tc.limit <= 0 || len(want) < tc.limit) {
				want = append(want, k)
			}
		}
		var got []string
		s.Range([]byte(tc.start), []byte(tc.end), tc.limit, func(k string, v []byte) bool {
			if string(v) != "v"+k {
				t.Errorf("Range gave %q=%q", k, v)
			}
			got = append(got, k)
			return true
		})
		if !slices.Equal(got, want) {
			t.Errorf("Range(%q, %q, %d) = %q, want %q", tc.start, tc.end, tc.limit, got, want)
		}
		if n := s.Snapshot().Count([]byte(tc.start), []byte(tc.end), tc.limit); n != len(want) {
			t.Errorf("Count(%q, %q, %d) = %d, want %d", tc.start, tc.end, tc.limit, n, len(want))
		}
	}
	var asc []string
	s.Snapshot().Ascend(func(k string, _ []byte) bool { asc = append(asc, k); return true })
	if !slices.Equal(asc, all) {
		t.Errorf("Ascend gave %d keys, want %d", len(asc), len(all))
	}
	if n := s.Snapshot().Len(); n != len(all) {
		t.Errorf("Snapshot Len = %d, want %d", n, len(all))
	}
}

// TestRangeStops checks that Range and Ascend stop as soon as fn returns
// false.
func TestRangeStops(t *testing.T) {
	s := New(Options{Stripes: 2})
	for i := range 500 {
		set(t, s, fmt.Sprintf("%03d", i), "v")
	}
	for _, stop := range []int{1, 2, 64, 65, 200} {
		calls := 0
		s.Range([]byte("000"), []byte("999"), 0, func(string, []byte) bool { calls++; return calls < stop })
		if calls != stop {
			t.Errorf("Range: fn called %d times after returning false at call %d", calls, stop)
		}
		calls = 0
		s.Snapshot().Ascend(func(string, []byte) bool { calls++; return calls < stop })
		if calls != stop {
			t.Errorf("Ascend: fn called %d times after returning false at call %d", calls, stop)
		}
	}
}

// TestSnapshotIsolation takes a snapshot, changes the store in every way,
// and checks that the snapshot still shows the old state.
func TestSnapshotIsolation(t *testing.T) {
	s := New(Options{Stripes: 4})
	for i := range 2000 {
		set(t, s, fmt.Sprintf("k%04d", i), strconv.Itoa(i))
	}
	sn := s.Snapshot()
	before := pairs(sn)

	set(t, s, "k0000", "changed")
	do(t, s, OpDel, 0, "k0001", "k0002")
	do(t, s, OpMSet, 0, "k0003", "m", "new", "n")
	do(t, s, OpAppend, 0, "k0004", "+")
	incrBy(t, s, "k0005", 10)
	do(t, s, OpCAS, 0, "k0006", "6", "swapped")
	for i := 1000; i < 2000; i++ {
		do(t, s, OpDel, 0, fmt.Sprintf("k%04d", i))
	}

	if got := pairs(sn); !slices.Equal(got, before) {
		t.Fatalf("snapshot changed: %d pairs, want %d", len(got), len(before))
	}
	if sn.Len() != 2000 || sn.Count([]byte("k0000"), []byte("k9999"), 0) != 2000 {
		t.Fatalf("snapshot Len %d, Count %d; want 2000", sn.Len(), sn.Count([]byte("k0000"), []byte("k9999"), 0))
	}
	var got []string
	sn.Range([]byte("k0000"), []byte("k0006"), 0, func(k string, v []byte) bool {
		got = append(got, k+"="+string(v))
		return true
	})
	if !slices.Equal(got, before[:7]) {
		t.Fatalf("snapshot Range = %q, want %q", got, before[:7])
	}
	do(t, s, OpFlush, 0)
	if got := pairs(sn); !slices.Equal(got, before) {
		t.Fatal("snapshot changed after FLUSH")
	}
	// And the store itself moved on.
	if s.Len() != 0 {
		t.Fatalf("store Len after FLUSH = %d", s.Len())
	}
}

// A write changes a key's cell in place only while no snapshot can hold
// it: each snapshot keeps the value its key had when it was taken, however
// many writes follow, in place or not.
func TestSnapshotCells(t *testing.T) {
	s := New(Options{Stripes: 1})
	set(t, s, "a", "1")
	set(t, s, "a", "2") // in place: no snapshot yet
	sn1 := s.Snapshot()
	set(t, s, "a", "3") // a new cell: sn1 holds the old one
	set(t, s, "a", "4") // in place
	sn2 := s.Snapshot()
	do(t, s, OpAppend, 0, "a", "+")
	incrBy(t, s, "b", 1)
	sn3 := s.Snapshot()
	set(t, s, "a", "5")
	incrBy(t, s, "b", 1)
	incrBy(t, s, "b", 1)
	for _, c := range []struct {
		sn   *Snapshot
		want []string
	}{{sn1, []string{"a=2"}}, {sn2, []string{"a=4"}}, {sn3, []string{"a=4+", "b=1"}}} {
		if got := pairs(c.sn); !slices.Equal(got, c.want) {
			t.Errorf("snapshot = %q, want %q", got, c.want)
		}
	}
	if got := s.RangeN([]byte("a"), []byte("b"), 10, nil); len(got) != 2 || string(got[0].Val) != "5" || string(got[1].Val) != "3" {
		t.Errorf("RangeN = %v, want a=5 b=3", got)
	}
	if s.Len() != 2 || s.Bytes() != 4 {
		t.Errorf("Len, Bytes = %d, %d; want 2, 4", s.Len(), s.Bytes())
	}
}

func TestStripesRoundedToPowerOfTwo(t *testing.T) {
	def := 1 << bits.Len(uint(DefaultStripes()-1))
	for _, tc := range []struct{ in, want int }{{0, def}, {-3, def}, {1, 1}, {3, 4}, {64, 64}, {65, 128}} {
		if got := len(New(Options{Stripes: tc.in}).stripes); got != tc.want {
			t.Errorf("Stripes %d: %d stripes, want %d", tc.in, got, tc.want)
		}
	}
}

func TestBadEntry(t *testing.T) {
	valid := [][]byte{
		entryOf(OpSet, SetNX, "key", "value"),
		entryOf(OpMSet, 0, "a", "1", "b", ""),
		entryOf(OpIncrBy, 0, "n", string(DeltaArg(-5))),
		entryOf(OpCAS, 0, "k", "", "v"),
		entryOf(OpFlush, 0),
	}
	cases := map[string][]byte{
		"nil":                    nil,
		"empty":                  {},
		"header only":            {EntryVersion, byte(OpFlush), 0},
		"version 0":              {0, byte(OpFlush), 0, 0},
		"version 2":              {2, byte(OpFlush), 0, 0},
		"op 0":                   {EntryVersion, 0, 0, 0},
		"op 9":                   {EntryVersion, 9, 0, 1, 1, 'k'},
		"op 255":                 {EntryVersion, 255, 0, 0},
		"nargs overflows varint": {EntryVersion, byte(OpDel), 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"nargs past the entry":   {EntryVersion, byte(OpDel), 0, 0xff, 0xff, 0x03, 1, 'k'},
		"nargs unterminated":     {EntryVersion, byte(OpDel), 0, 0x80},
		"length overflows":       {EntryVersion, byte(OpDel), 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"length past the entry":  {EntryVersion, byte(OpDel), 0, 1, 5, 'k'},
		"huge length":            {EntryVersion, byte(OpDel), 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 'k'},
		"SET 1 arg":              entryOf(OpSet, 0, "k"),
		"SET 3 args":             entryOf(OpSet, 0, "k", "v", "x"),
		"MSET 0 args":            entryOf(OpMSet, 0),
		"MSET 3 args":            entryOf(OpMSet, 0, "a", "1", "b"),
		"MSETNX 1 arg":           entryOf(OpMSetNX, 0, "a"),
		"DEL 0 args":             entryOf(OpDel, 0),
		"INCRBY 1 arg":           entryOf(OpIncrBy, 0, "n"),
		"INCRBY 7-byte delta":    entryOf(OpIncrBy, 0, "n", "1234567"),
		"INCRBY 9-byte delta":    entryOf(OpIncrBy, 0, "n", "123456789"),
		"INCRBY 3 args":          entryOf(OpIncrBy, 0, "n", string(DeltaArg(1)), "x"),
		"APPEND 1 arg":           entryOf(OpAppend, 0, "k"),
		"APPEND 3 args":          entryOf(OpAppend, 0, "k", "a", "b"),
		"CAS 2 args":             entryOf(OpCAS, 0, "k", "v"),
		"CAS 4 args":             entryOf(OpCAS, 0, "k", "v", "w", "x"),
		"FLUSH 1 arg":            entryOf(OpFlush, 0, "x"),
		"SET trailing byte":      append(entryOf(OpSet, 0, "k", "v"), 0),
		"FLUSH trailing byte":    append(entryOf(OpFlush, 0), 'x'),
	}
	for i, e := range valid {
		for n := range len(e) {
			cases[fmt.Sprintf("entry %d cut to %d bytes", i, n)] = e[:n]
		}
	}
	s := New(Options{})
	set(t, s, "k", "keep")
	set(t, s, "n", "1")
	for name, e := range cases {
		r, err := s.Apply(e)
		if !errors.Is(err, ErrBadEntry) {
			t.Errorf("%s: Apply(%q) = %+v, %v; want ErrBadEntry", name, e, r, err)
		}
		if value(s, "k") != "keep" || value(s, "n") != "1" || s.Len() != 2 || s.Bytes() != 7 {
			t.Fatalf("%s: a bad entry changed the store: %q", name, pairs(s.Snapshot()))
		}
	}
	// The valid entries themselves decode.
	for i, e := range valid {
		if _, err := s.Apply(e); err != nil {
			t.Errorf("valid entry %d: %v", i, err)
		}
	}
}

// TestEntryRoundTrip checks that decodeEntry returns what AppendEntry was given.
func TestEntryRoundTrip(t *testing.T) {
	big := make([]byte, 300) // a length that takes two varint bytes
	args := [][]byte{[]byte("k"), {}, big, []byte("\x00\xff")}
	b := AppendEntry([]byte("prefix"), OpMSet, SetGet, args...)
	if string(b[:6]) != "prefix" {
		t.Fatalf("AppendEntry overwrote its dst: %q", b[:6])
	}
	e, err := decodeEntry(b[6:], nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.op != OpMSet || e.flags != SetGet || !slices.EqualFunc(e.args, args, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Fatalf("decoded op %d flags %d args %q", e.op, e.flags, e.args)
	}
	if d := DeltaArg(-2); string(d) != "\xff\xff\xff\xff\xff\xff\xff\xfe" {
		t.Fatalf("DeltaArg(-2) = %x", d)
	}
}

// TestClashingHashes keeps hashes of two bits, so that nearly every key's
// hash is another's: writes, overwrites with a snapshot holding the old
// cells, deletes and reads must still find each key's own value.
func TestClashingHashes(t *testing.T) {
	s := New(Options{Stripes: 1, hashBits: 2})
	key := func(i int) []byte { return fmt.Appendf(nil, "key%d", i) }
	const n = 100
	for i := range n {
		mustApply(t, s, AppendEntry(nil, OpSet, 0, key(i), fmt.Appendf(nil, "v%d", i)))
	}
	snap := s.Snapshot()
	for i := 0; i < n; i += 2 {
		mustApply(t, s, AppendEntry(nil, OpSet, 0, key(i), fmt.Appendf(nil, "w%d", i)))
	}
	for i := 0; i < n; i += 3 {
		mustApply(t, s, AppendEntry(nil, OpDel, 0, key(i)))
	}
	want := 0
	for i := range n {
		v, ok := s.Get(key(i))
		switch {
		case i%3 == 0:
			if ok {
				t.Errorf("%s: %q after DEL", key(i), v)
			}
			continue
		case i%2 == 0:
			if string(v) != fmt.Sprintf("w%d", i) {
				t.Errorf("%s: %q, %v; want w%d", key(i), v, ok, i)
			}
		default:
			if string(v) != fmt.Sprintf("v%d", i) {
				t.Errorf("%s: %q, %v; want v%d", key(i), v, ok, i)
			}
		}
		want++
	}
	if s.Len() != int64(want) {
		t.Errorf("Len %d, want %d", s.Len(), want)
	}
	got := 0
	snap.Ascend(func(k string, v []byte) bool {
		var i int
		fmt.Sscanf(k, "key%d", &i)
		if string(v) != fmt.Sprintf("v%d", i) {
			t.Errorf("snapshot: %s is %q, want v%d", k, v, i)
		}
		got++
		return true
	})
	if got != n {
		t.Errorf("snapshot holds %d keys, want %d", got, n)
	}
}

// TestTombstoneKeepsNoCell deletes a key while a snapshot may hold its cell,
// which leaves a tombstone in the index. The tombstone may outlive the
// cell's own item by long, so neither it nor its key may point into the
// cell (where a short key lives), or the deleted value would stay in memory
// with it.
func TestTombstoneKeepsNoCell(t *testing.T) {
	for _, key := range []string{"short", "a key of more than sixteen bytes"} {
		s := New(Options{Stripes: 1})
		mustApply(t, s, AppendEntry(nil, OpSet, 0, []byte(key), make([]byte, 1024)))
		st, h := s.locate([]byte(key))
		old := st.lookupLocked(h, []byte(key))
		view := s.Snapshot() // seals fresh: the tombstone is then its only item
		mustApply(t, s, AppendEntry(nil, OpDel, 0, []byte(key)))
		fresh := st.mu.idx.fresh
		if len(fresh) != 1 || !fresh[0].tomb || fresh[0].c.key != key || !fresh[0].absent() {
			t.Fatalf("%q: fresh holds %d items, the first %+v; want the key's tombstone", key, len(fresh), fresh[0])
		}
		start, end := uintptr(unsafe.Pointer(old)), uintptr(unsafe.Pointer(old))+unsafe.Sizeof(*old)
		for what, p := range map[string]uintptr{
			"cell": uintptr(unsafe.Pointer(fresh[0].c)),
			"key":  uintptr(unsafe.Pointer(unsafe.StringData(fresh[0].c.key))),
		} {
			if p >= start && p < end {
				t.Errorf("%q: the tombstone's %s points into the deleted cell, which keeps it and its value alive", key, what)
			}
		}
		if fresh[0].c.val != nil {
			t.Errorf("%q: the tombstone's cell holds a value", key)
		}
		runtime.KeepAlive(view)
	}
}

// TestLockSetOfHashes checks that the stripes of a prefetch's hashes are
// the set that a command on the same keys locks, in ascending order, with
// as many stripes as a bitmask holds and with more.
func TestLockSetOfHashes(t *testing.T) {
	for _, stripes := range []int{1, 16, 64, 128} {
		s := New(Options{Stripes: stripes})
		for n := 1; n <= PrefetchKeys; n += 7 {
			keys := make([][]byte, n)
			hashes := make([]uint64, n)
			for i := range keys {
				keys[i] = []byte(strconv.Itoa(n*1000 + i%5*i)) // some repeated
				hashes[i] = s.hash(keys[i])
			}
			want := s.lockSetOf(keys, 1)
			if got := s.lockSetOfHashes(hashes, nil); !slices.Equal(got, want) {
				t.Fatalf("%d stripes, %d keys: lockSetOfHashes = %v, want %v", stripes, n, got, want)
			}
		}
	}
}
