package store

import (
	"errors"
	"slices"
	"testing"
)

// clockTest applies single entries to a store in batches stamped with a
// clock the test sets, in Unix ms.
type clockTest struct {
	t     *testing.T
	s     *Store
	index uint64
	now   int64
}

func newClockTest(t *testing.T) *clockTest {
	return &clockTest{t: t, s: New(Options{Stripes: 4}), now: 1_700_000_000_000}
}

func (ct *clockTest) apply(op Op, flags byte, args ...[]byte) Result {
	ct.t.Helper()
	ct.index++
	var b Batch
	b.Add(op, flags, args...)
	var res Result
	if err := ct.s.ApplyBatchAt(b.Bytes(), Stamp{Index: ct.index, Time: ct.now * 1e6}, func(_ int, r Result) { res = r }); err != nil {
		ct.t.Fatalf("op %d: %v", op, err)
	}
	return res
}

// setAt sets key to val with the deadline at (Unix ms), or none if at is 0.
func (ct *clockTest) setAt(key, val string, at int64) {
	ct.t.Helper()
	if at == 0 {
		ct.apply(OpSet, 0, []byte(key), []byte(val))
		return
	}
	ct.apply(OpSetExpire, 0, []byte(key), []byte(val), DeadlineArg(at))
}

// want checks key's value and deadline (0: none).
func (ct *clockTest) want(key, val string, found bool, at int64) {
	ct.t.Helper()
	v, ok := ct.s.Get([]byte(key))
	if ok != found || string(v) != val {
		ct.t.Errorf("%s: got %q, %v; want %q, %v", key, v, ok, val, found)
	}
	dl, has, _ := ct.s.TTL([]byte(key))
	if has != (at != 0) || dl != at {
		ct.t.Errorf("%s: deadline %d, %v; want %d", key, dl, has, at)
	}
}

// TestKeyspaceOpsKeepDeadlines checks what the keyspace ops (40-47) do
// with deadlines, as Redis's commands do with TTLs: SETRANGE, SETBIT,
// INCRBYFLOAT and BITFIELD keep the key's, RENAME moves it, COPY copies
// it, BITOP's destination and GETDEL lose it.
func TestKeyspaceOpsKeepDeadlines(t *testing.T) {
	ct := newClockTest(t)
	later := ct.now + 60_000
	for _, k := range []string{"r", "b", "f", "bf"} {
		ct.setAt(k, "1", later)
	}
	ct.apply(OpSetRange, 0, []byte("r"), Uint64Arg(1), []byte("x"))
	ct.apply(OpSetBit, 1, []byte("b"), Uint64Arg(15))
	ct.apply(OpIncrByFloat, 0, []byte("f"), []byte("0.5"))
	ct.apply(OpBitField, 0, []byte("bf"), BitfieldOp{Kind: BitfieldSet, Bits: 8, Offset: 8, Value: 'z'}.Arg())
	ct.want("r", "1x", true, later)
	ct.want("b", "1\x01", true, later)
	ct.want("f", "1.5", true, later)
	ct.want("bf", "1z", true, later)

	// RENAME moves the deadline, replacing the destination's, or clearing
	// it when the source has none.
	ct.setAt("src", "v", later)
	ct.setAt("dst", "old", later+1)
	ct.apply(OpRename, 0, []byte("src"), []byte("dst"))
	ct.want("src", "", false, 0)
	ct.want("dst", "v", true, later)
	ct.setAt("plain", "p", 0)
	ct.apply(OpRename, 0, []byte("plain"), []byte("dst"))
	ct.want("dst", "p", true, 0)

	// COPY copies it; COPY REPLACE replaces the destination's.
	ct.setAt("c", "cv", later)
	ct.apply(OpCopy, 0, []byte("c"), []byte("c2"))
	ct.want("c", "cv", true, later)
	ct.want("c2", "cv", true, later)
	ct.setAt("c3", "x", later+5)
	ct.apply(OpCopy, CopyReplace, []byte("dst"), []byte("c3"))
	ct.want("c3", "p", true, 0)

	// BITOP's destination loses its deadline, as SET's.
	ct.apply(OpBitOp, BitOr, []byte("c2"), []byte("r"))
	ct.want("c2", "1x", true, 0)

	// GETDEL removes the key and its deadline.
	before := ct.s.Expires()
	if r := ct.apply(OpGetDel, 0, []byte("c")); !r.Found || string(r.Val) != "cv" {
		t.Errorf("GETDEL c: %+v", r)
	}
	if got := ct.s.Expires(); got != before-1 {
		t.Errorf("Expires after GETDEL: %d, want %d", got, before-1)
	}
}

// TestKeyspaceOpsSeeExpiredKeysMissing checks that the keyspace ops treat
// a key whose deadline the clock has passed, not removed yet, as missing.
func TestKeyspaceOpsSeeExpiredKeysMissing(t *testing.T) {
	ct := newClockTest(t)
	soon := ct.now + 10
	for _, k := range []string{"gd", "sr", "sb", "f", "bf", "rn", "cp", "src", "dst"} {
		ct.setAt(k, "12", soon)
	}
	ct.now = soon + 1
	if r := ct.apply(OpGetDel, 0, []byte("gd")); r.Found {
		t.Errorf("GETDEL of an expired key: %+v", r)
	}
	if r := ct.apply(OpSetRange, 0, []byte("sr"), Uint64Arg(0), []byte("x")); r.Int != 1 {
		t.Errorf("SETRANGE of an expired key: length %d, want 1", r.Int)
	}
	ct.want("sr", "x", true, 0)
	ct.apply(OpSetBit, 1, []byte("sb"), Uint64Arg(7))
	ct.want("sb", "\x01", true, 0)
	if r := ct.apply(OpIncrByFloat, 0, []byte("f"), []byte("1")); string(r.Val) != "1" {
		t.Errorf("INCRBYFLOAT of an expired key: %q, want 1", r.Val)
	}
	ct.want("f", "1", true, 0)
	ct.apply(OpBitField, 0, []byte("bf"), BitfieldOp{Kind: BitfieldSet, Bits: 8, Value: 'a'}.Arg())
	ct.want("bf", "a", true, 0)
	if r := ct.apply(OpRename, 0, []byte("rn"), []byte("x")); !errors.Is(r.Err, ErrNoSuchKey) {
		t.Errorf("RENAME of an expired key: %+v", r)
	}
	if r := ct.apply(OpCopy, 0, []byte("cp"), []byte("x")); r.Done {
		t.Errorf("COPY of an expired key: %+v", r)
	}
	ct.setAt("live", "v", 0)
	if r := ct.apply(OpRename, RenameNX, []byte("live"), []byte("dst")); !r.Done {
		t.Errorf("RENAMENX onto an expired key: %+v", r)
	}
	ct.want("dst", "v", true, 0)
	if r := ct.apply(OpBitOp, BitOr, []byte("out"), []byte("src")); r.Int != 0 {
		t.Errorf("BITOP of an expired key: length %d, want 0", r.Int)
	}
	ct.want("out", "", false, 0)
}

// TestScanSkipsExpiredKeys checks that Scan and Snapshot skip keys whose
// deadline the clock has passed, while Len (DBSIZE, which counts keys not
// yet removed, as Redis's does) and Expires still count them.
func TestScanSkipsExpiredKeys(t *testing.T) {
	ct := newClockTest(t)
	ct.setAt("gone", "v", ct.now+10)
	ct.setAt("kept", "v", ct.now+60_000)
	ct.setAt("plain", "v", 0)
	ct.now += 11
	ct.apply(OpSet, 0, []byte("other"), []byte("v")) // advances the clock
	var got []string
	for cursor, n := uint64(0), 0; n == 0 || cursor != 0; n++ {
		if n > 100 {
			t.Fatal("scan does not end")
		}
		cursor = ct.s.Scan(cursor, 10, func(k string) { got = append(got, k) })
	}
	if len(got) != 3 || slices.Contains(got, "gone") {
		t.Errorf("Scan: %q, want kept, plain and other", got)
	}
	var ranged []string
	ct.s.Snapshot().Range([]byte(""), []byte("\xff"), 0, func(k string, _ []byte) bool { ranged = append(ranged, k); return true })
	if len(ranged) != 3 || slices.Contains(ranged, "gone") {
		t.Errorf("Snapshot: %q", ranged)
	}
	var live []string
	ct.s.Snapshot().AscendLive(func(k string, _ []byte) bool { live = append(live, k); return true })
	if !slices.Equal(live, []string{"kept", "other", "plain"}) {
		t.Errorf("AscendLive: %q", live)
	}
	if n := ct.s.Exists([][]byte{[]byte("gone"), []byte("kept")}); n != 1 {
		t.Errorf("Exists: %d, want 1", n)
	}
	if n, e := ct.s.Len(), ct.s.Expires(); n != 4 || e != 2 {
		t.Errorf("Len, Expires: %d, %d, want 4, 2 (the expired key is not removed yet)", n, e)
	}
}

// TestExecWatchedKeyExpired checks that a transaction is refused when a
// key it watched has expired by the clock at its apply, removed or not, as
// in Redis, and that the removal of an expired key counts as a write of it
// for WATCH; and that a transaction's reads see an expired key missing.
func TestExecWatchedKeyExpired(t *testing.T) {
	ct := newClockTest(t)
	exec := func(watched string, pos uint64) Result {
		var tx Tx
		tx.Watch([]byte(watched), pos)
		tx.Add(OpRead, 0, []byte(watched))
		return ct.apply(OpExec, 0, tx.Args()...)
	}
	ct.setAt("w", "v", ct.now+10)
	pos := ct.s.WatchPoint()
	if r := exec("w", pos); !r.Done || !r.Sub[0].Sub[0].Found {
		t.Fatalf("EXEC before the deadline: %+v", r)
	}
	ct.now += 11
	if r := exec("w", pos); r.Done {
		t.Errorf("EXEC after the watched key's deadline, not removed: %+v", r)
	}
	ct.apply(OpExpireDue, 0, []byte("w"))
	if n := ct.s.Len(); n != 0 {
		t.Fatalf("OpExpireDue left %d keys", n)
	}
	if r := exec("w", pos); r.Done {
		t.Errorf("EXEC after the watched key was removed by expiry: %+v", r)
	}
	if r := exec("w", ct.s.WatchPoint()); !r.Done || r.Sub[0].Sub[0].Found {
		t.Errorf("EXEC watching after the removal: %+v", r)
	}

	// A read inside a transaction sees an expired key missing.
	ct.setAt("r", "v", ct.now+10)
	ct.now += 11
	var tx Tx
	tx.Add(OpRead, 0, []byte("r"))
	if r := ct.apply(OpExec, 0, tx.Args()...); !r.Done || r.Sub[0].Sub[0].Found {
		t.Errorf("OpRead of an expired key: %+v", r)
	}
}
