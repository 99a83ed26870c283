package store

import (
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// watched is a key a transaction watched, and its watch position.
type watched struct {
	key string
	pos uint64
}

// txEntry encodes an OpExec of the commands cs (as cmdOf reads them, and
// "read KEY ..." for an OpRead, "del KEY ..." for an OpDel) that watched ws.
func txEntry(tb testing.TB, ws []watched, cs ...string) []byte {
	tb.Helper()
	var t Tx
	for _, w := range ws {
		t.Watch([]byte(w.key), w.pos)
	}
	for _, c := range cs {
		f := strings.Fields(c)
		switch f[0] {
		case "read", "del":
			op := map[string]Op{"read": OpRead, "del": OpDel}[f[0]]
			args := make([][]byte, len(f)-1)
			for i, k := range f[1:] {
				args[i] = []byte(k)
			}
			t.Add(op, 0, args...)
		default:
			e, err := decodeEntry(cmdOf(tb, c), nil)
			if err != nil {
				tb.Fatal(err)
			}
			t.Add(e.op, e.flags, e.args...)
		}
	}
	return AppendEntry(nil, OpExec, 0, t.Args()...)
}

// showTx writes an OpExec's result: "aborted", or its entries' results as
// show writes them, an OpRead's as [...].
func showTx(r Result) string {
	if !r.Done {
		return "aborted"
	}
	var out []string
	for _, sub := range r.Sub {
		if sub.Sub != nil {
			var keys []string
			for _, k := range sub.Sub {
				keys = append(keys, show(k))
			}
			out = append(out, "["+strings.Join(keys, ", ")+"]")
			continue
		}
		out = append(out, show(sub))
	}
	return strings.Join(out, "; ")
}

// applyTx applies one OpExec alone in a batch stamped at, and returns its
// result as showTx writes it.
func applyTx(tb testing.TB, s *Store, at Stamp, ws []watched, cs ...string) string {
	tb.Helper()
	return showTx(applyAt(tb, s, at, batchOf(txEntry(tb, ws, cs...)))[0])
}

func TestTxAppliesInOrder(t *testing.T) {
	s := New(Options{})
	set(t, s, "s", "str")
	got := applyTx(t, s, Stamp{}, nil,
		"set a 1", "incr a 5", "read a b", "incr s 1", "append b xy", "getset a 9", "del a s", "read a s b")
	want := "done; int=6; [found val=6, -]; err=notint; int=2; done found val=6; int=2; [-, -, found val=xy]"
	if got != want {
		t.Errorf("transaction:\n got %s\nwant %s", got, want)
	}
	if v := value(s, "b") + "," + value(s, "a") + "," + value(s, "s"); v != "xy,<missing>,<missing>" {
		t.Errorf("after it: b,a,s = %s", v)
	}
	if got := applyTx(t, s, Stamp{}, nil); got != "" {
		t.Errorf("empty transaction: %q, want no results", got)
	}
}

// bucketOf returns key's bucket in the watch table.
func bucketOf(key string) uint32 { return crc32.Checksum([]byte(key), castagnoli) & (watchBuckets - 1) }

func TestWatch(t *testing.T) {
	if bucketOf("k") == bucketOf("other") {
		t.Fatal("the test needs k and other in different buckets")
	}
	tests := []struct {
		name    string
		before  []string // commands applied before WATCH
		between []string // and between WATCH and EXEC
		aborted bool
	}{
		{"untouched", cmds("set k 1"), nil, false},
		{"another key", cmds("set k 1"), cmds("set other 2"), false},
		{"absent and untouched", nil, cmds("set other 2"), false},
		{"written", cmds("set k 1"), cmds("set k 2"), true},
		{"same value", cmds("set k 1"), cmds("set k 1"), true},
		{"created", nil, cmds("set k 1"), true},
		{"created and deleted", nil, cmds("set k 1", "del k"), true},
		{"deleted", cmds("set k 1"), cmds("del k"), true},
		{"deleted, absent", nil, cmds("del k"), false},
		{"incremented", cmds("set k 1"), cmds("incr k 1"), true},
		{"failed increment", cmds("set k x"), cmds("incr k 1"), false},
		{"appended", cmds("set k 1"), cmds("append k ."), true},
		{"flushed", cmds("set other 1"), cmds("flush"), true},
		{"in a transaction", cmds("set k 1"), cmds("tx set k 3"), true},
		{"read in a transaction", cmds("set k 1"), cmds("tx read k"), false},
	}
	for _, stamped := range []bool{false, true} {
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%s/stamped=%v", tc.name, stamped), func(t *testing.T) {
				s := New(Options{})
				index := uint64(0)
				apply := func(c string) {
					at := Stamp{}
					if stamped {
						index++
						at = Stamp{Index: index}
					}
					if tx, ok := strings.CutPrefix(c, "tx "); ok {
						applyTx(t, s, at, nil, tx)
						return
					}
					if c == "del k" {
						applyAt(t, s, at, batchOf(entryOf(OpDel, 0, "k")))
						return
					}
					applyCmds(t, s, at, c)
				}
				for _, c := range tc.before {
					apply(c)
				}
				pos := s.WatchPoint()
				for _, c := range tc.between {
					apply(c)
				}
				if stamped {
					index++
				}
				got := applyTx(t, s, Stamp{Index: index}, []watched{{"k", pos}}, "set done 1")
				if aborted := got == "aborted"; aborted != tc.aborted {
					t.Errorf("EXEC: %s, want aborted %v", got, tc.aborted)
				}
				if _, found := s.Get([]byte("done")); found == tc.aborted {
					t.Errorf("the transaction's write applied: %v, want %v", found, !tc.aborted)
				}
			})
		}
	}
}

// TestWatchSameEntry checks the positions of batches of one log entry: a
// WATCH between two of them sees the later one's write as after it.
func TestWatchSameEntry(t *testing.T) {
	s := New(Options{})
	applyCmds(t, s, Stamp{Index: 5}, "set k 1")
	pos := s.WatchPoint()
	applyCmds(t, s, Stamp{Index: 5}, "set k 2") // another batch of entry 5
	if got := applyTx(t, s, Stamp{Index: 6}, []watched{{"k", pos}}, "set k 3"); got != "aborted" {
		t.Errorf("EXEC after a write in the same entry as the WATCH: %s, want aborted", got)
	}
	pos = s.WatchPoint()
	if got := applyTx(t, s, Stamp{Index: 7}, []watched{{"k", pos}}, "set k 3"); got != "done found" {
		t.Errorf("EXEC with no write since the WATCH: %s, want done", got)
	}
}

// TestWatchDeterministic applies one history to a store that runs through
// it and to one restored half way from the first's snapshot and watch
// table: their transactions must decide alike, and their states agree.
func TestWatchDeterministic(t *testing.T) {
	const n = 200
	type step struct {
		batch []byte
		at    Stamp
	}
	var steps []step
	var positions []uint64
	a := New(Options{})
	for i := range n {
		at := Stamp{Index: uint64(i + 1)}
		var batch []byte
		key := fmt.Sprintf("k%d", i%7)
		switch i % 3 {
		case 0, 1:
			batch = batchOf(cmdOf(t, fmt.Sprintf("set %s %d", key, i)))
		default:
			// Watch a key at a position some steps back (positions come
			// from a, which runs through the history once).
			pos := positions[max(0, len(positions)-1-i%5)]
			batch = batchOf(txEntry(t, []watched{{fmt.Sprintf("k%d", (i/3)%7), pos}}, "incr count 1"))
		}
		steps = append(steps, step{batch, at})
		applyAt(t, a, at, batch)
		positions = append(positions, a.WatchPoint())
	}
	for _, cut := range []int{0, n / 3, n / 2} {
		b, c := New(Options{}), New(Options{})
		var resB, resC []string
		for i, st := range steps {
			if i == cut { // c restores b's state here
				b.Snapshot().Ascend(func(k string, v []byte) bool { c.Put([]byte(k), append([]byte(nil), v...)); return true })
				if err := c.RestoreWatches(b.Watches()); err != nil {
					t.Fatal(err)
				}
			}
			resB = append(resB, showTx(applyAt(t, b, st.at, st.batch)[0]))
			if i >= cut {
				resC = append(resC, showTx(applyAt(t, c, st.at, st.batch)[0]))
			}
		}
		if !slices.Equal(resB[cut:], resC) {
			t.Errorf("cut %d: results differ:\n%v\n%v", cut, resB[cut:], resC)
		}
		if pb, pc := pairs(b.Snapshot()), pairs(c.Snapshot()); !slices.Equal(pb, pc) {
			t.Errorf("cut %d: states differ:\n%v\n%v", cut, pb, pc)
		}
		if value(b, "count") == "<missing>" || !slices.Contains(resB, "aborted") {
			t.Errorf("the history should both commit and abort transactions: %v", resB)
		}
	}
}

func TestWatchesRoundTrip(t *testing.T) {
	s := New(Options{})
	applyCmds(t, s, Stamp{Index: 3}, "set a 1", "set b 2", "flush", "set c 3")
	applyCmds(t, s, Stamp{Index: 9}, "set d 4")
	enc := s.Watches()
	r := New(Options{})
	if err := r.RestoreWatches(enc); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Watches(), enc) || r.WatchPoint() != s.WatchPoint() {
		t.Errorf("restored table differs")
	}
	bad := [][]byte{nil, {2}, enc[:len(enc)-1], append(slices.Clone(enc), 0), enc[:10]}
	for i, b := range bad {
		if err := r.RestoreWatches(b); !errors.Is(err, ErrBadWatches) {
			t.Errorf("damaged table %d: %v, want ErrBadWatches", i, err)
		}
	}
	if !slices.Equal(r.Watches(), enc) {
		t.Errorf("a damaged table changed the store's")
	}
}

func TestTxSessions(t *testing.T) {
	s := New(Options{})
	res := applyCmds(t, s, Stamp{Index: 1, Time: 1}, "open")
	if res[0] != fmt.Sprintf("done int=%d", idOf(1, 0)) {
		t.Fatalf("open: %v", res)
	}
	id := "@1"
	tx := []string{"seq " + id + " 1 1", "incr n 1", "seq " + id + " 2 1", "incr n 10", "read n"}
	first := applyTx(t, s, Stamp{Index: 2, Time: 2}, nil, tx...)
	again := applyTx(t, s, Stamp{Index: 3, Time: 3}, nil, tx...) // resent: its writes take effect once
	if first != "done; int=1; done; int=11; [found val=11]" || again != first {
		t.Errorf("transaction in a session: %s, then resent: %s", first, again)
	}
	if got := applyTx(t, s, Stamp{}, nil, tx...); got != "err=nostamp; err=nostamp; err=nostamp; err=nostamp; [found val=11]" {
		t.Errorf("without a stamp: %s", got)
	}
}

// TestTxOneSessionWrite wraps a whole transaction, a read and writes of
// the key it reads, in one OpSeq: resent, it is answered with the kept
// result of its one application, sub-results included, and applies
// nothing; the kept result survives a snapshot of the session table, and
// counts its sub-results in the session's bytes. A transaction aborted by
// a watched key keeps its result too.
func TestTxOneSessionWrite(t *testing.T) {
	s := New(Options{})
	applyCmds(t, s, Stamp{Index: 1, Time: 1}, "open")
	applyCmds(t, s, Stamp{Index: 2, Time: 2}, "set k0 c0")
	tx := txEntry(t, nil, "read k0", "set k1 v", "set k0 c4")
	send := func(index uint64, s *Store) string {
		t.Helper()
		res := applyAt(t, s, Stamp{Index: index, Time: int64(index)}, batchOf(cmdOf(t, "seq @1 1 1"), tx))
		if show(res[0]) != "done" {
			t.Fatalf("the OpSeq's own result: %s", show(res[0]))
		}
		return showTx(res[1])
	}
	const want = "[found val=c0]; done; done found"
	if got := send(3, s); got != want {
		t.Fatalf("transaction: %s, want %s", got, want)
	}
	if got := send(4, s); got != want || value(s, "k0") != "c4" || value(s, "k1") != "v" {
		t.Fatalf("resent: %s (want %s), k0 = %s, k1 = %s", got, want, value(s, "k0"), value(s, "k1"))
	}
	ss := s.sessions.t.byID[idOf(1, 0)]
	if len(ss.results) != 1 || ss.bytes != keptSize(ss.results[0].res) || ss.bytes <= 3*resultCost {
		t.Fatalf("kept %d results of %d bytes; want one, counting its 4 sub-results", len(ss.results), ss.bytes)
	}
	checkSessions(t, &s.sessions.t)
	r := New(Options{})
	if err := r.RestoreSessions(s.Sessions()); err != nil {
		t.Fatal(err)
	}
	checkSessions(t, &r.sessions.t)
	if got := send(5, r); got != want || r.Len() != 0 {
		t.Fatalf("resent to a restored table: %s (want %s), %d keys (want none applied)", got, want, r.Len())
	}

	pos := s.WatchPoint()
	applyCmds(t, s, Stamp{Index: 6, Time: 6}, "set w 1")
	aborted := txEntry(t, []watched{{"w", pos}}, "read k0", "set k0 c9")
	for i := range 2 {
		res := applyAt(t, s, Stamp{Index: uint64(7 + i), Time: int64(7 + i)}, batchOf(cmdOf(t, "seq @1 2 1"), aborted))
		if got := showTx(res[1]); got != "aborted" || value(s, "k0") != "c4" {
			t.Fatalf("watched transaction, send %d: %s, k0 = %s; want aborted, c4", i+1, got, value(s, "k0"))
		}
	}
	if ss := s.sessions.t.byID[idOf(1, 0)]; len(ss.results) != 2 || ss.results[1].seq != 2 {
		t.Fatalf("the aborted transaction's result is not kept: %d results", len(ss.results))
	}
}

func TestTxBadEntries(t *testing.T) {
	inner := AppendEntry(nil, OpExec, 0, Uint64Arg(0))
	tests := []struct {
		name string
		args [][]byte
	}{
		{"no watch count", nil},
		{"short watch count", [][]byte{{0}}},
		{"watches past the end", [][]byte{Uint64Arg(1), []byte("k")}},
		{"short position", [][]byte{Uint64Arg(1), []byte("k"), {1}}},
		{"nested", [][]byte{Uint64Arg(0), inner}},
		{"session open", [][]byte{Uint64Arg(0), AppendEntry(nil, OpSessionOpen, 0)}},
		{"seq at end", [][]byte{Uint64Arg(0), cmdOf(t, "seq 1 1 1")}},
		{"seq wraps a read", [][]byte{Uint64Arg(0), cmdOf(t, "seq 1 1 1"), entryOf(OpRead, 0, "k")}},
		{"bad entry", [][]byte{Uint64Arg(0), {EntryVersion, byte(OpSet), 0, 1}}},
	}
	s := New(Options{})
	for _, tc := range tests {
		e := AppendEntry(nil, OpExec, 0, tc.args...)
		if _, err := s.Apply(e); !errors.Is(err, ErrBadEntry) {
			t.Errorf("%s: Apply: %v, want ErrBadEntry", tc.name, err)
		}
		if err := CheckBatch(batchOf(e)); !errors.Is(err, ErrBadEntry) {
			t.Errorf("%s: CheckBatch: %v, want ErrBadEntry", tc.name, err)
		}
	}
	if s.Len() != 0 {
		t.Errorf("refused entries changed the store")
	}
}

// TestTxIsolated runs transactions that set two keys, in different
// stripes, to the same value, while readers read both: no reader may see
// one key written and not the other.
func TestTxIsolated(t *testing.T) {
	s := New(Options{Stripes: 16})
	a, b := "a", "b"
	for i := 0; s.stripeOf([]byte(a)) == s.stripeOf([]byte(b)); i++ {
		b = fmt.Sprintf("b%d", i)
	}
	const txs = 2000
	applyTx(t, s, Stamp{}, nil, "set "+a+" 000000", "set "+b+" 000000")
	// Each reader returns what it read of a and b, and whether it read both
	// at one instant; if not, it read a first.
	readers := []func() (x, y string, atOnce bool){
		func() (string, string, bool) { return value(s, a), value(s, b), false },
		func() (x, y string, _ bool) {
			s.MGet([][]byte{[]byte(a), []byte(b)}, func(i int, v []byte, _ bool) {
				if i == 0 {
					x = string(v)
				} else {
					y = string(v)
				}
			})
			return x, y, true
		},
		func() (string, string, bool) {
			ps := s.RangeN([]byte(a), []byte(b), 2, nil)
			return string(ps[0].Val), string(ps[1].Val), true
		},
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, read := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(time.Minute)
			for n := 0; n < 100*txs && time.Now().Before(deadline); n++ {
				select {
				case <-stop:
					return
				default:
				}
				// b is written with a, so it is never older than a.
				if x, y, atOnce := read(); x > y || (atOnce && x != y) {
					t.Errorf("read %s=%s and %s=%s: a transaction was seen half done", a, x, b, y)
					return
				}
			}
		}()
	}
	for i := 1; i <= txs; i++ {
		v := fmt.Sprintf("%06d", i)
		applyTx(t, s, Stamp{}, nil, "set "+a+" "+v, "set "+b+" "+v)
	}
	close(stop)
	wg.Wait()
}

// TestWatchConcurrentIncrements has goroutines increment one key
// optimistically, each applying its own transactions: read the watch
// position and the value, then a transaction that watched the key there
// and sets it one higher. The key ends at the number of transactions that
// applied: no increment was lost to another's.
func TestWatchConcurrentIncrements(t *testing.T) {
	s := New(Options{})
	const goroutines, tries = 4, 300
	var wg sync.WaitGroup
	applied := make([]int, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range tries {
				pos := s.WatchPoint()
				n := 0
				if v, ok := s.Get([]byte("n")); ok {
					fmt.Sscan(string(v), &n)
				}
				r, err := s.Apply(txEntry(t, []watched{{"n", pos}}, fmt.Sprintf("set n %d", n+1)))
				if err != nil {
					t.Error(err)
					return
				}
				if r.Done {
					applied[g]++
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range applied {
		total += n
	}
	if got := value(s, "n"); got != fmt.Sprint(total) {
		t.Fatalf("n = %s after %d applied increments", got, total)
	}
}
