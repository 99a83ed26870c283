package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// The session tests write commands as strings:
//
//	open                    OpSessionOpen
//	close ID                OpSessionClose
//	seq ID SEQ LOW          OpSeq
//	incr KEY DELTA          OpIncrBy
//	set KEY VAL             OpSet
//	getset KEY VAL          OpSet with SetGet
//	append KEY SUFFIX       OpAppend
//	flush                   OpFlush
//
// where an ID of @N is the first client id that the entry of index N
// issues, @N.M the M+1th, and max is 2^64-1.

// idOf returns the id of the m+1th session that the entry at index opens.
func idOf(index, m uint64) uint64 { return index<<openBits | m }

// cmdOf encodes the command that c writes.
func cmdOf(tb testing.TB, c string) []byte {
	tb.Helper()
	f := strings.Fields(c)
	num := func(s string) []byte {
		var x uint64
		var err error
		switch {
		case s == "max":
			x = math.MaxUint64
		case strings.HasPrefix(s, "@"):
			index, m, _ := strings.Cut(s[1:], ".")
			var i, j uint64
			if i, err = strconv.ParseUint(index, 10, 64); err == nil && m != "" {
				j, err = strconv.ParseUint(m, 10, 64)
			}
			x = idOf(i, j)
		default:
			x, err = strconv.ParseUint(s, 10, 64)
		}
		if err != nil {
			tb.Fatalf("command %q: %v", c, err)
		}
		return Uint64Arg(x)
	}
	switch {
	case f[0] == "open" && len(f) == 1:
		return AppendEntry(nil, OpSessionOpen, 0)
	case f[0] == "close" && len(f) == 2:
		return AppendEntry(nil, OpSessionClose, 0, num(f[1]))
	case f[0] == "seq" && len(f) == 4:
		return AppendEntry(nil, OpSeq, 0, num(f[1]), num(f[2]), num(f[3]))
	case f[0] == "incr" && len(f) == 3:
		d, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			tb.Fatalf("command %q: %v", c, err)
		}
		return AppendEntry(nil, OpIncrBy, 0, []byte(f[1]), DeltaArg(d))
	case f[0] == "set" && len(f) == 3:
		return entryOf(OpSet, 0, f[1], f[2])
	case f[0] == "getset" && len(f) == 3:
		return entryOf(OpSet, SetGet, f[1], f[2])
	case f[0] == "append" && len(f) == 3:
		return entryOf(OpAppend, 0, f[1], f[2])
	case f[0] == "flush" && len(f) == 1:
		return AppendEntry(nil, OpFlush, 0)
	}
	tb.Fatalf("unknown command %q", c)
	return nil
}

// batchOf frames encoded entries as a batch.
func batchOf(entries ...[]byte) []byte {
	var b []byte
	for _, e := range entries {
		b = binary.AppendUvarint(b, uint64(len(e)))
		b = append(b, e...)
	}
	return b
}

// applyCmds applies the commands cs as one batch stamped at, and returns
// their results as show writes them.
func applyCmds(tb testing.TB, s *Store, at Stamp, cs ...string) []string {
	tb.Helper()
	var entries [][]byte
	for _, c := range cs {
		entries = append(entries, cmdOf(tb, c))
	}
	var got []string
	for _, r := range applyAt(tb, s, at, batchOf(entries...)) {
		got = append(got, show(r))
	}
	return got
}

// applyAt applies batch stamped at, checks that fn is called once per
// entry in order, and returns the results.
func applyAt(tb testing.TB, s *Store, at Stamp, batch []byte) []Result {
	tb.Helper()
	var res []Result
	err := s.ApplyBatchAt(batch, at, func(i int, r Result) {
		if i != len(res) {
			tb.Fatalf("result %d came as number %d", i, len(res))
		}
		res = append(res, r)
	})
	if err != nil {
		tb.Fatalf("ApplyBatchAt: %v", err)
	}
	return res
}

// errNames are the short names show gives errors.
var errNames = map[error]string{
	ErrSessionExpired: "expired", ErrStaleSequence: "stale", ErrNoStamp: "nostamp",
	ErrTooManyOpens: "toomany", ErrNotInteger: "notint", ErrOverflow: "overflow", ErrTooLarge: "toolarge",
}

// show writes a result in brief: its true flags, its Val and Int if set,
// its error; "-" for the zero Result.
func show(r Result) string {
	var f []string
	if r.Done {
		f = append(f, "done")
	}
	if r.Found {
		f = append(f, "found")
	}
	if r.Val != nil {
		f = append(f, "val="+string(r.Val))
	}
	if r.Int != 0 {
		f = append(f, fmt.Sprintf("int=%d", r.Int))
	}
	if r.Err != nil {
		f = append(f, "err="+errNames[r.Err])
	}
	if len(f) == 0 {
		return "-"
	}
	return strings.Join(f, " ")
}

// step is one batch of a session test: its stamp, its commands, and their
// results.
type step struct {
	index uint64
	time  int64
	cmds  []string
	want  []string
}

// cmds and want make steps read as tables.
func cmds(c ...string) []string { return c }
func want(w ...string) []string { return w }

func TestSessionOps(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
		k     string // the value of key k at the end
	}{
		{"ids are index and count", []step{
			{1, 0, cmds("open", "open"), want("done int=65536", "done int=65537")},
			{1, 0, cmds("open"), want("done int=65538")}, // another batch of the same entry
			{3, 0, cmds("open"), want("done int=196608")},
		}, "<missing>"},
		{"open needs a stamp", []step{
			{0, 0, cmds("open"), want("err=nostamp")},
		}, "<missing>"},
		{"seq needs a stamp", []step{
			{1, 0, cmds("open"), want("done int=65536")},
			{0, 0, cmds("seq @1 0 0", "incr k 1"), want("err=nostamp", "err=nostamp")},
		}, "<missing>"},
		{"close needs a stamp", []step{
			{1, 0, cmds("open"), want("done int=65536")},
			{0, 0, cmds("close @1"), want("err=nostamp")},
			{2, 0, cmds("seq @1 0 0", "incr k 1"), want("done", "int=1")},
		}, "1"},
		{"a write applies once", []step{
			{1, 0, cmds("open"), want("done int=65536")},
			{2, 0, cmds("seq @1 0 0", "incr k 1"), want("done", "int=1")},
			{3, 0, cmds("seq @1 0 0", "incr k 1"), want("done", "int=1")},
			{4, 0, cmds("seq @1 0 0", "incr k 1", "seq @1 1 0", "incr k 1", "seq @1 1 0", "incr k 1"), want("done", "int=1", "done", "int=2", "done", "int=2")},
		}, "2"},
		{"unknown client", []step{
			{1, 0, cmds("seq 77 0 0", "incr k 1", "seq @1 0 0", "incr k 1"), want("err=expired", "err=expired", "err=expired", "err=expired")},
		}, "<missing>"},
		{"acknowledged is stale", []step{
			{1, 0, cmds("open"), want("done int=65536")},
			{2, 0, cmds("seq @1 0 0", "incr k 1", "seq @1 1 1", "incr k 1"), want("done", "int=1", "done", "int=2")},
			{3, 0, cmds("seq @1 0 1", "incr k 1", "seq @1 1 1", "incr k 1"), want("err=stale", "err=stale", "done", "int=2")},
			{4, 0, cmds("seq @1 1 2", "incr k 1"), want("err=stale", "err=stale")}, // acknowledged by this very entry
		}, "2"},
		{"seq 2^64-1 is stale", []step{
			{1, 0, cmds("open"), want("done int=65536")},
			{2, 0, cmds("seq @1 max 0", "incr k 1"), want("err=stale", "err=stale")},
		}, "<missing>"},
		{"a failed write is kept", []step{
			{1, 0, cmds("open", "set k x"), want("done int=65536", "done")},
			{2, 0, cmds("seq @1 5 0", "incr k 1", "set k 7"), want("done", "err=notint", "done found")},
			{3, 0, cmds("seq @1 5 0", "incr k 1"), want("done", "err=notint")},
		}, "7"},
		{"a kept value is a copy", []step{
			{1, 0, cmds("open", "set k a"), want("done int=65536", "done")},
			{2, 0, cmds("seq @1 0 0", "getset k b", "set k c"), want("done", "done found val=a", "done found")},
			{3, 0, cmds("seq @1 0 0", "getset k b"), want("done", "done found val=a")},
		}, "c"},
		{"flush keeps sessions", []step{
			{1, 0, cmds("open"), want("done int=65536")},
			{2, 0, cmds("seq @1 0 0", "incr k 1", "flush"), want("done", "int=1", "done")},
			{3, 0, cmds("seq @1 0 0", "incr k 1", "seq @1 1 0", "flush", "seq @1 1 0", "flush"), want("done", "int=1", "done", "done", "done", "done")},
		}, "<missing>"},
		{"close", []step{
			{1, 0, cmds("open", "open"), want("done int=65536", "done int=65537")},
			{2, 0, cmds("close @1", "close @1", "close 5"), want("done", "-", "-")},
			{3, 0, cmds("seq @1 0 0", "incr k 1", "seq @1.1 0 0", "incr k 1"), want("err=expired", "err=expired", "done", "int=1")},
		}, "1"},
		{"expiry by stamps", []step{
			{1, 1000, cmds("open", "open"), want("done int=65536", "done int=65537")},
			{2, 1100, cmds("seq @1 0 0", "incr k 1"), want("done", "int=1")}, // idle for the TTL: alive
			{3, 1150, cmds("seq @1 1 0", "incr k 1"), want("done", "int=2")},
			{4, 1201, cmds("seq @1.1 0 0", "incr k 1", "seq @1 2 0", "incr k 1"), want("err=expired", "err=expired", "done", "int=3")},
		}, "3"},
		{"the clock never goes back", []step{
			{1, 1000, cmds("open"), want("done int=65536")},
			{2, 0, cmds("seq @1 0 0", "incr k 1"), want("done", "int=1")}, // a leader behind: still 1000
			{3, 1100, cmds("seq @1 1 0", "incr k 1"), want("done", "int=2")},
			{4, 500, cmds("open"), want("done int=262144")},
			{5, 1200, cmds("seq @1 2 0", "incr k 1"), want("done", "int=3")},              // used at 1100
			{6, 1201, cmds("seq @4 0 0", "incr k 1"), want("err=expired", "err=expired")}, // opened at 1100
		}, "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{SessionTTL: 100})
			for i, st := range tc.steps {
				got := applyCmds(t, s, Stamp{st.index, st.time}, st.cmds...)
				if strings.Join(got, "; ") != strings.Join(st.want, "; ") {
					t.Fatalf("step %d, %q:\n got %q\nwant %q", i, st.cmds, got, st.want)
				}
				checkSessions(t, &s.sessions.t)
			}
			if v := value(s, "k"); v != tc.k {
				t.Fatalf("k = %q, want %q", v, tc.k)
			}
		})
	}
}

// TestSessionOpensInOneEntry checks that an entry opens at most 1<<openBits
// sessions, whatever its batches, and that ids stay unique past it.
func TestSessionOpensInOneEntry(t *testing.T) {
	s := New(Options{})
	open := cmdOf(t, "open")
	var entries [][]byte
	for range 1<<openBits - 1 {
		entries = append(entries, open)
	}
	applyAt(t, s, Stamp{Index: 7}, batchOf(entries...))
	got := applyCmds(t, s, Stamp{Index: 7}, "open", "open")
	if w := fmt.Sprintf("done int=%d", idOf(7, 1<<openBits-1)); got[0] != w || got[1] != "err=toomany" {
		t.Fatalf("the last opens of entry 7 gave %q, want %q and err=toomany", got, w)
	}
	if got := applyCmds(t, s, Stamp{Index: 6}, "open"); got[0] != "err=toomany" { // a stamp that went back
		t.Fatalf("an open at index 6 after 7 gave %q, want err=toomany", got)
	}
	if got := applyCmds(t, s, Stamp{Index: 1 << 47}, "open"); got[0] != "err=toomany" {
		t.Fatalf("an open at index 2^47 gave %q: the id does not fit in an int64", got)
	}
	if got, w := applyCmds(t, s, Stamp{Index: 1<<47 - 1}, "open"), fmt.Sprintf("done int=%d", idOf(1<<47-1, 0)); got[0] != w {
		t.Fatalf("an open at index 2^47-1 gave %q, want %q", got, w)
	}
	checkSessions(t, &s.sessions.t)
}

// TestSessionBatchChecks checks that an OpSeq must be followed, in its
// batch, by a write on keys, and that a batch that breaks it is refused
// whole, as any malformed batch.
func TestSessionBatchChecks(t *testing.T) {
	seq, set := cmdOf(t, "seq 1 0 0"), cmdOf(t, "set a 1")
	var fill [][]byte // 63 writes, so that the next entry ends ApplyBatch's first run (see prefetch)
	for i := range PrefetchKeys - 1 {
		fill = append(fill, entryOf(OpSet, 0, fmt.Sprintf("f%d", i), "1"))
	}
	for _, tc := range []struct {
		name  string
		batch []byte
	}{
		{"seq last", batchOf(set, seq)},
		{"seq seq", batchOf(seq, seq, set)},
		{"seq open", batchOf(seq, cmdOf(t, "open"), set)},
		{"seq close", batchOf(seq, cmdOf(t, "close 1"), set)},
		{"seq last after a run", batchOf(append(fill, seq)...)},
		{"seq open after a run", batchOf(append(fill, seq, cmdOf(t, "open"))...)},
		{"seq with a short arg", batchOf(AppendEntry(nil, OpSeq, 0, Uint64Arg(1), Uint64Arg(2), []byte{3}), set)},
		{"seq with two args", batchOf(AppendEntry(nil, OpSeq, 0, Uint64Arg(1), Uint64Arg(2)), set)},
		{"open with an arg", batchOf(AppendEntry(nil, OpSessionOpen, 0, Uint64Arg(1)))},
		{"close with no arg", batchOf(AppendEntry(nil, OpSessionClose, 0))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckBatch(tc.batch); !errors.Is(err, ErrBadEntry) {
				t.Fatalf("CheckBatch = %v, want ErrBadEntry", err)
			}
			s := New(Options{})
			if err := s.ApplyBatchAt(tc.batch, Stamp{Index: 1}, nil); !errors.Is(err, ErrBadEntry) {
				t.Fatalf("ApplyBatchAt = %v, want ErrBadEntry", err)
			}
			if s.Len() != 0 || len(s.sessions.t.byID) != 0 {
				t.Fatal("a refused batch changed the store")
			}
		})
	}
	// An OpSeq that ends the first run wraps the first entry of the next.
	s := New(Options{})
	applyCmds(t, s, Stamp{Index: 1}, "open")
	batch := batchOf(append(fill, cmdOf(t, "seq @1 0 0"), cmdOf(t, "incr k 1"))...)
	for i := range 2 {
		res := applyAt(t, s, Stamp{Index: uint64(2 + i)}, batch)
		if r := res[len(res)-1]; r.Int != 1 || value(s, "k") != "1" {
			t.Fatalf("pass %d: the wrapped INCR gave %+v, k = %s; want 1 and 1", i, r, value(s, "k"))
		}
	}
	if _, err := s.Apply(cmdOf(t, "seq @1 0 0")); !errors.Is(err, ErrBadEntry) {
		t.Fatalf("Apply of an OpSeq = %v, want ErrBadEntry", err)
	}
	for _, c := range []string{"open", "close @1"} {
		if r, err := s.Apply(cmdOf(t, c)); err != nil || r.Err != ErrNoStamp {
			t.Fatalf("Apply(%s) = %+v, %v; want ErrNoStamp", c, r, err)
		}
	}
}

// TestSessionPipelinedOutOfOrder applies a session's writes with their seqs
// out of order, then retries them all: each took effect once.
func TestSessionPipelinedOutOfOrder(t *testing.T) {
	s := New(Options{})
	applyCmds(t, s, Stamp{Index: 1}, "open")
	var first []string
	for i, seq := range []int{3, 1, 4, 0, 2} {
		first = append(first, applyCmds(t, s, Stamp{Index: uint64(2 + i)}, fmt.Sprintf("seq @1 %d 0", seq), fmt.Sprintf("incr k %d", 1<<seq))...)
	}
	var again []string
	for i, seq := range []int{0, 1, 2, 3, 4} {
		again = append(again, applyCmds(t, s, Stamp{Index: uint64(10 + i)}, fmt.Sprintf("seq @1 %d 0", seq), "incr k 1000")...)
	}
	if w := "done; int=8; done; int=10; done; int=26; done; int=27; done; int=31"; strings.Join(first, "; ") != w {
		t.Fatalf("first = %q, want %q", first, w)
	}
	if w := "done; int=27; done; int=10; done; int=31; done; int=8; done; int=26"; strings.Join(again, "; ") != w {
		t.Fatalf("retries = %q, want %q", again, w)
	}
	if v := value(s, "k"); v != "31" {
		t.Fatalf("k = %s, want 31", v)
	}
	if ss := s.sessions.t.byID[idOf(1, 0)]; len(ss.results) != 5 {
		t.Fatalf("%d results kept, want 5", len(ss.results))
	}
	checkSessions(t, &s.sessions.t)
}

// TestSessionAckTrims checks that lowest unacknowledged drops the results
// below it, and only those, even past a gap in the seqs.
func TestSessionAckTrims(t *testing.T) {
	s := New(Options{})
	applyCmds(t, s, Stamp{Index: 1}, "open")
	for seq := range 10 {
		if seq != 5 {
			applyCmds(t, s, Stamp{Index: 2}, fmt.Sprintf("seq @1 %d 0", seq), "incr k 1")
		}
	}
	ss := s.sessions.t.byID[idOf(1, 0)]
	for _, tc := range []struct {
		low        uint64
		kept       int
		floor, min uint64
	}{{0, 9, 0, 0}, {3, 6, 3, 3}, {3, 6, 3, 3}, {6, 4, 6, 6}, {2, 4, 6, 6}, {9, 1, 9, 9}} {
		applyCmds(t, s, Stamp{Index: 3}, fmt.Sprintf("seq @1 9 %d", tc.low), "incr k 1") // seq 9 is kept
		if len(ss.results) != tc.kept || ss.floor != tc.floor || ss.results[0].seq != tc.min {
			t.Fatalf("after low %d: %d results from seq %d, floor %d; want %d from %d, floor %d", tc.low, len(ss.results), ss.results[0].seq, ss.floor, tc.kept, tc.min, tc.floor)
		}
		checkSessions(t, &s.sessions.t)
	}
	if got := applyCmds(t, s, Stamp{Index: 4}, "seq @1 5 0", "incr k 1"); got[1] != "err=stale" {
		t.Fatalf("seq 5, never applied, below the floor: %q, want stale", got)
	}
	if v := value(s, "k"); v != "9" {
		t.Fatalf("k = %s, want 9", v)
	}
}

// TestSessionExpiryBounded checks that a batch removes at most expireStep
// expired sessions, the least recently active first, and that one not yet
// removed is expired all the same.
func TestSessionExpiryBounded(t *testing.T) {
	s := New(Options{SessionTTL: 10})
	open := cmdOf(t, "open")
	for i := range 1000 {
		applyAt(t, s, Stamp{Index: uint64(1 + i), Time: int64(i / 500)}, batchOf(open)) // 500 at time 0, 500 at 1
	}
	tb := &s.sessions.t
	applyCmds(t, s, Stamp{Index: 2000, Time: 11}, "seq @1000 0 0", "incr k 1") // the newest, alive
	if len(tb.byID) != 1000-expireStep {
		t.Fatalf("%d sessions after one batch at time 11, want %d", len(tb.byID), 1000-expireStep)
	}
	if got := applyCmds(t, s, Stamp{Index: 2001, Time: 11}, "seq @499 0 0", "incr k 1"); got[0] != "err=expired" {
		t.Fatalf("an expired session not removed yet: %q, want expired", got)
	}
	for i := range 20 {
		applyAt(t, s, Stamp{Index: uint64(2002 + i), Time: 11}, nil)
	}
	if len(tb.byID) != 500 || tb.head.id != idOf(501, 0) || tb.tail.id != idOf(1000, 0) {
		t.Fatalf("%d sessions, from %x to %x; want the 500 opened at time 1, the last used at 11", len(tb.byID), tb.head.id, tb.tail.id)
	}
	checkSessions(t, tb)
}

// TestSessionBounds checks each bound on its own.
func TestSessionBounds(t *testing.T) {
	t.Run("sessions", func(t *testing.T) {
		s := New(Options{MaxSessions: 3})
		for i := range 5 {
			applyCmds(t, s, Stamp{Index: uint64(1 + i)}, "open")
			if i == 2 {
				applyCmds(t, s, Stamp{Index: uint64(1 + i)}, "seq @1 0 0", "incr k 1") // @1 becomes the most recently active
			}
		}
		got := applyCmds(t, s, Stamp{Index: 20}, "seq @1 0 0", "incr k 1", "seq @2 0 0", "incr k 1", "seq @3 0 0", "incr k 1", "seq @4 0 0", "incr k 1", "seq @5 0 0", "incr k 1")
		if w := "done; int=1; err=expired; err=expired; err=expired; err=expired; done; int=2; done; int=3"; strings.Join(got, "; ") != w {
			t.Fatalf("got %q, want %q", got, w)
		}
	})
	t.Run("results", func(t *testing.T) {
		s := New(Options{MaxSessionResults: 4})
		applyCmds(t, s, Stamp{Index: 1}, "open")
		for seq := range 10 {
			applyCmds(t, s, Stamp{Index: 2}, fmt.Sprintf("seq @1 %d 0", seq), "incr k 1")
		}
		for seq := range 10 {
			w := "err=stale"
			if seq >= 6 {
				w = fmt.Sprintf("int=%d", seq+1)
			}
			if got := applyCmds(t, s, Stamp{Index: 3}, fmt.Sprintf("seq @1 %d 0", seq), "incr k 1"); got[1] != w {
				t.Fatalf("retry of seq %d: %q, want %s", seq, got[1], w)
			}
		}
	})
	t.Run("bytes", func(t *testing.T) {
		s := New(Options{MaxSessionBytes: 100})
		v40, big := strings.Repeat("v", 40), strings.Repeat("b", 101)
		applyCmds(t, s, Stamp{Index: 1}, "open", "set k "+v40)
		for seq := range 4 {
			applyCmds(t, s, Stamp{Index: 2}, fmt.Sprintf("seq @1 %d 0", seq), "getset k "+v40)
		}
		ss := s.sessions.t.byID[idOf(1, 0)]
		if len(ss.results) != 2 || ss.floor != 2 || ss.bytes != 80 {
			t.Fatalf("%d results of %d bytes, floor %d; want 2 of 80, floor 2", len(ss.results), ss.bytes, ss.floor)
		}
		applyCmds(t, s, Stamp{Index: 3}, "set k "+big)
		if got := applyCmds(t, s, Stamp{Index: 3}, "seq @1 4 0", "getset k x"); got[1] != "done found val="+big {
			t.Fatalf("a write whose result is over the bound: %q", got)
		}
		if got := applyCmds(t, s, Stamp{Index: 4}, "seq @1 4 0", "getset k x"); got[1] != "err=stale" {
			t.Fatalf("retry of a write whose result was over the bound: %q, want stale", got)
		}
		if len(ss.results) != 0 || ss.floor != 5 || ss.bytes != 0 {
			t.Fatalf("%d results of %d bytes, floor %d; want none, floor 5", len(ss.results), ss.bytes, ss.floor)
		}
	})
	t.Run("memory", func(t *testing.T) {
		lim := limitsOf(Options{MaxSessionResults: 2, MaxSessionBytes: 100, MaxSessionMemory: 1})
		if w := int64(sessionCost + 2*resultCost + 100); lim.memory != w {
			t.Fatalf("memory bound %d, want at least one session's, %d", lim.memory, w)
		}
		s := New(Options{MaxSessionResults: 2, MaxSessionBytes: 100, MaxSessionMemory: 1000})
		v := strings.Repeat("v", 100)
		applyCmds(t, s, Stamp{Index: 1}, "set k "+v)
		for i := range 10 {
			applyCmds(t, s, Stamp{Index: uint64(2 + i)}, "open", fmt.Sprintf("seq @%d 0 0", 2+i), "getset k "+v)
			if tb := &s.sessions.t; tb.mem > 1000 {
				t.Fatalf("table of %d bytes, over its bound", tb.mem)
			}
		}
		if n := len(s.sessions.t.byID); n != 1000/(sessionCost+resultCost+100) {
			t.Fatalf("%d sessions left", n)
		}
	})
}

// TestSessionFlood runs random session traffic from many clients against
// small bounds, and checks the table's invariants and bounds after every
// batch, and that every write took effect at most once.
func TestSessionFlood(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed>>32|1))
	opt := Options{SessionTTL: 50, MaxSessions: 20, MaxSessionResults: 8, MaxSessionBytes: 64, MaxSessionMemory: 4000}
	s := New(opt)
	lim := limitsOf(opt)
	var ids []uint64
	applied := map[string]bool{} // keys of writes applied: each write sets a key of its own
	now := int64(0)
	for index := uint64(1); index < 3000; index++ {
		now += rng.Int64N(12) - 2 // sometimes back
		var entries [][]byte
		for range 1 + rng.IntN(8) {
			if len(ids) == 0 || rng.IntN(10) == 0 {
				entries = append(entries, cmdOf(t, "open"))
				continue
			}
			id := ids[max(0, len(ids)-rng.IntN(30)-1)] // mostly ones still open
			seq := rng.Uint64N(16)
			entries = append(entries,
				AppendEntry(nil, OpSeq, 0, Uint64Arg(id), Uint64Arg(seq), Uint64Arg(rng.Uint64N(8))),
				entryOf(OpIncrBy, 0, fmt.Sprintf("%d/%d", id, seq), string(DeltaArg(1))))
		}
		for i, r := range applyAt(t, s, Stamp{Index: index, Time: now}, batchOf(entries...)) {
			if r.Int > 0 && entries[i][1] == byte(OpSessionOpen) {
				ids = append(ids, uint64(r.Int))
			}
		}
		tb := &s.sessions.t
		checkSessions(t, tb)
		if len(tb.byID) > lim.sessions || tb.mem > lim.memory {
			t.Fatalf("index %d: %d sessions, %d bytes: over the bounds", index, len(tb.byID), tb.mem)
		}
		for ss := tb.head; ss != nil; ss = ss.next {
			if len(ss.results) > lim.results || ss.bytes > lim.bytes {
				t.Fatalf("index %d: client %x keeps %d results of %d bytes: over the bounds", index, ss.id, len(ss.results), ss.bytes)
			}
		}
	}
	s.Snapshot().Ascend(func(k string, v []byte) bool {
		if string(v) != "1" {
			t.Errorf("write %s applied %s times", k, v)
		}
		applied[k] = true
		return true
	})
	t.Logf("%d sessions opened, %d writes applied", len(ids), len(applied))
}

// checkSessions fails tb unless t keeps the invariants of sessionTable and
// session.
func checkSessions(tb testing.TB, t *sessionTable) {
	tb.Helper()
	var prev *session
	var mem int64
	n := 0
	for ss := t.head; ss != nil; prev, ss = ss, ss.next {
		n++
		switch {
		case ss.prev != prev || t.byID[ss.id] != ss:
			tb.Fatalf("client %x: list or map broken", ss.id)
		case ss.id == 0 || t.issued(ss.id) && ss.id > t.lastID:
			tb.Fatalf("client %x: id 0 or above the last, %x", ss.id, t.lastID)
		case ss.active > t.clock || (prev != nil && ss.active < prev.active):
			tb.Fatalf("client %x: active %d out of order or past the clock, %d", ss.id, ss.active, t.clock)
		}
		b := 0
		for j, k := range ss.results {
			if k.seq < ss.floor || (j > 0 && k.seq <= ss.results[j-1].seq) {
				tb.Fatalf("client %x: seq %d below the floor, %d, or out of order", ss.id, k.seq, ss.floor)
			}
			b += keptSize(k.res)
		}
		if b != ss.bytes {
			tb.Fatalf("client %x: bytes %d, want %d", ss.id, ss.bytes, b)
		}
		mem += sessionCost + int64(len(ss.results))*resultCost + int64(b)
	}
	if t.tail != prev || n != len(t.byID) || mem != t.mem {
		tb.Fatalf("tail, count or mem broken: %d sessions listed, %d mapped; mem %d, want %d", n, len(t.byID), t.mem, mem)
	}
}
