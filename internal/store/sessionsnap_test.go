package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestSessionsRoundTrip checks that a restored table encodes as the one it
// came from, and behaves the same: two stores, fed the same batches and
// stamps, one of them restored from the other's encoding midway, encode
// byte-identical tables all along.
func TestSessionsRoundTrip(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed>>32|1))
	opt := Options{SessionTTL: 200, MaxSessions: 30, MaxSessionResults: 6}
	a, b := New(opt), New(Options{Stripes: 1, SessionTTL: 200, MaxSessions: 30, MaxSessionResults: 6})
	now := int64(1 << 40)
	for index := uint64(1); index < 1500; index++ {
		now += rng.Int64N(10) - 3
		batch := randomSessionBatch(t, rng, index)
		at := Stamp{Index: index, Time: now}
		ra, rb := applyAt(t, a, at, batch), applyAt(t, b, at, batch)
		if fmt.Sprint(ra) != fmt.Sprint(rb) {
			t.Fatalf("index %d: results differ:\n%v\n%v", index, ra, rb)
		}
		ea, eb := a.Sessions(), b.Sessions()
		if !bytes.Equal(ea, eb) {
			t.Fatalf("index %d: the tables encode differently", index)
		}
		if index%100 == 0 {
			c := New(opt)
			if err := c.RestoreSessions(ea); err != nil {
				t.Fatalf("index %d: %v", index, err)
			}
			checkSessions(t, &c.sessions.t)
			if !bytes.Equal(c.Sessions(), ea) {
				t.Fatalf("index %d: a restored table encodes differently", index)
			}
			if err := b.RestoreSessions(ea); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := len(a.sessions.t.byID); n == 0 {
		t.Fatal("no sessions left: the test tests little")
	}
}

// randomSessionBatch returns a random batch of session ops and writes, with
// client ids the entries before index may have issued.
func randomSessionBatch(tb testing.TB, rng *rand.Rand, index uint64) []byte {
	var entries [][]byte
	for range 1 + rng.IntN(6) {
		switch p := rng.IntN(20); {
		case p < 3:
			entries = append(entries, cmdOf(tb, "open"))
		case p < 4:
			entries = append(entries, AppendEntry(nil, OpSessionClose, 0, Uint64Arg(idOf(1+rng.Uint64N(index), 0))))
		default:
			id := idOf(1+rng.Uint64N(index), rng.Uint64N(2))
			entries = append(entries, AppendEntry(nil, OpSeq, 0, Uint64Arg(id), Uint64Arg(rng.Uint64N(12)), Uint64Arg(rng.Uint64N(6))))
			k := fmt.Sprintf("k%d", rng.IntN(4))
			switch rng.IntN(3) {
			case 0:
				entries = append(entries, entryOf(OpIncrBy, 0, k, string(DeltaArg(1))))
			case 1:
				entries = append(entries, entryOf(OpSet, SetGet, k, strings.Repeat("x", rng.IntN(5))))
			default:
				entries = append(entries, entryOf(OpAppend, 0, k, "y"))
			}
		}
	}
	return batchOf(entries...)
}

// TestRestoreSessionsRefuses checks that damaged tables are refused with
// ErrBadSessions, and leave the table as it was.
func TestRestoreSessionsRefuses(t *testing.T) {
	s := New(Options{})
	applyCmds(t, s, Stamp{Index: 1, Time: 5}, "open", "open", "set k v")
	applyCmds(t, s, Stamp{Index: 2, Time: 6}, "seq @1 3 2", "getset k w", "seq @1 4 2", "incr k 1")
	good := s.Sessions()
	// The offsets of good's fields: header of 17 bytes, then the sessions.
	// Session @1.1 (ids 65537), then @1 (65536) with two results.
	const s1, s2 = 18, 18 + 18
	u64 := func(x uint64) []byte { return Uint64Arg(x) }
	edit := func(off int, b ...byte) []byte {
		c := append([]byte(nil), good...)
		copy(c[off:], b)
		return c
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"version", edit(0, SessionsVersion+1)},
		{"trailing", append(append([]byte(nil), good...), 0)},
		{"count too high", edit(17, 3)},
		{"count too low", edit(17, 1)},
		{"id 0", edit(s1, u64(0)...)},
		{"id past last", edit(s1, u64(idOf(1, 2))...)},
		{"id twice", edit(s2, u64(idOf(1, 1))...)},
		{"active past clock", edit(s1+8, u64(7)...)},
		{"active out of order", edit(s2+8, u64(4)...)},
		{"floor past a seq", edit(s2+16, 4)},
		{"seqs out of order", edit(s2+18+11+1+1, 3)},
		{"flags", edit(s2+18+1, 16)},
		{"error code", edit(s2+18+2, byte(len(resultErrs)))},
		{"value overruns", edit(s2+18+11, 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Options{})
			applyCmds(t, c, Stamp{Index: 9}, "open")
			before := c.Sessions()
			if err := c.RestoreSessions(tc.b); !errors.Is(err, ErrBadSessions) {
				t.Fatalf("RestoreSessions = %v, want ErrBadSessions", err)
			}
			if !bytes.Equal(c.Sessions(), before) {
				t.Fatal("a refused table changed the store's")
			}
		})
	}
	// Version 3 is version 4 without the slot-move fence, version 2 is
	// version 3 without sub-results, and version 1 is version 2 without
	// the slot-move records (good has none, and fence 0: the count and
	// the fence, both 0, are its last two bytes).
	for v, cut := range map[byte]int{3: 1, 2: 1, 1: 2} {
		old := New(Options{})
		if err := old.RestoreSessions(edit(0, v)[:len(good)-cut]); err != nil || !bytes.Equal(old.Sessions(), good) {
			t.Fatalf("a version %d table: %v, or it changed", v, err)
		}
	}
	for n := range len(good) {
		if err := New(Options{}).RestoreSessions(good[:n]); !errors.Is(err, ErrBadSessions) {
			t.Fatalf("the first %d bytes of %d: %v, want ErrBadSessions", n, len(good), err)
		}
	}
	c := New(Options{})
	if err := c.RestoreSessions(good); err != nil || !bytes.Equal(c.Sessions(), good) {
		t.Fatalf("the good table: %v", err)
	}
}

// TestSessionsKeepWriteErrors checks that kept results keep every error a
// write fails with, through Sessions and RestoreSessions.
func TestSessionsKeepWriteErrors(t *testing.T) {
	opt := Options{MaxValue: 4}
	s := New(opt)
	applyCmds(t, s, Stamp{Index: 1}, "open", "set x x", fmt.Sprintf("incr n %d", int64(1<<63-1)))
	writes := []string{"seq @1 0 0", "incr x 1", "seq @1 1 0", "incr n 1", "seq @1 2 0", "append k 12345", "seq @1 3 0", "getset x y"}
	want := "done; err=notint; done; err=overflow; done; err=toolarge; done; done found val=x"
	if got := applyCmds(t, s, Stamp{Index: 2}, writes...); strings.Join(got, "; ") != want {
		t.Fatalf("first = %q, want %q", got, want)
	}
	c := New(opt)
	if err := c.RestoreSessions(s.Sessions()); err != nil {
		t.Fatal(err)
	}
	if got := applyCmds(t, c, Stamp{Index: 3}, writes...); strings.Join(got, "; ") != want {
		t.Fatalf("retries after a restore = %q, want %q", got, want)
	}
}
