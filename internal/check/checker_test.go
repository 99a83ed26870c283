package check

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// testHistory builds histories by hand. Times are in arbitrary units.
type testHistory struct{ h *history }

func newTestHistory(keys ...string) *testHistory {
	return &testHistory{&history{header: header{Version: historyVersion, Clients: 3, Keys: keys}}}
}

// op adds an operation of client c with a reply.
func (b *testHistory) op(c int, call, ret int64, cmd string, r reply) *testHistory {
	b.h.Ops = append(b.h.Ops, op{Client: c, Call: call, Return: ret, Cmd: strings.Fields(cmd), Reply: r})
	return b
}

// lost adds an operation of client c whose outcome is unknown.
func (b *testHistory) lost(c int, call, ret int64, cmd string) *testHistory {
	b.h.Ops = append(b.h.Ops, op{Client: c, Call: call, Return: ret, Cmd: strings.Fields(cmd), Unknown: "test"})
	return b
}

// final adds a final read.
func (b *testHistory) final(call int64, key string, r reply) *testHistory {
	b.h.Ops = append(b.h.Ops, op{Client: b.h.Clients, Call: call, Return: call + 1, Cmd: []string{"GET", key}, Reply: r, Final: true})
	return b
}

func (b *testHistory) check(t *testing.T) *Result {
	t.Helper()
	res, err := check(b.h, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// windowCmds lists the commands of a failing part's smallest window.
func windowCmds(res *Result) []string {
	var cmds []string
	for _, p := range res.parts {
		for _, o := range p.minimal.ops {
			cmds = append(cmds, strings.Join(res.history.Ops[o.Metadata.(opRef).index].Cmd, " "))
		}
	}
	return cmds
}

func TestCheck(t *testing.T) {
	ok, one, two := okReply, strReply("1"), strReply("2")
	for _, tc := range []struct {
		name   string
		h      *testHistory
		want   Verdict
		window []string // the smallest failing window's commands, on Fail
		lost   int
	}{
		{"sequential", newTestHistory("a").
			op(0, 0, 1, "SET a 1", ok).op(1, 2, 3, "GET a", one), Pass, nil, 0},
		{"concurrent write seen late or early", newTestHistory("a").
			op(0, 0, 10, "SET a 1", ok).op(1, 1, 2, "GET a", nilReply).op(2, 3, 4, "GET a", one), Pass, nil, 0},
		{"stale read", newTestHistory("a").
			op(0, 0, 1, "SET a 1", ok).op(0, 2, 3, "SET a 2", ok).op(1, 4, 5, "GET a", one),
			Fail, []string{"SET a 2", "GET a"}, 0},
		{"stale read among other keys", newTestHistory("a", "b").
			op(0, 0, 1, "MSET a 1 b 1", ok).op(0, 2, 3, "MSET b 2 a 2", ok).op(1, 4, 5, "MGET b a", arr(two, one)),
			Fail, []string{"MSET b 2 a 2", "MGET b a"}, 0},
		{"torn multi-key write", newTestHistory("a", "b").
			op(0, 0, 1, "MSET a 1 b 1", ok).op(0, 2, 10, "MSET a 2 b 2", ok).op(1, 3, 4, "MGET a b", arr(two, one)),
			Fail, []string{"MSET a 1 b 1", "MSET a 2 b 2", "MGET a b"}, 0},
		{"transaction", newTestHistory("a", "b").
			op(0, 0, 10, "MULTI SET a 1 GET b SET b 1 EXEC", arr(ok, nilReply, ok)).
			op(1, 1, 2, "MGET a b", arr(nilReply, nilReply)).op(2, 3, 4, "MULTI GET a GET b EXEC", arr(one, one)).
			final(11, "a", one).final(11, "b", one), Pass, nil, 0},
		{"half a transaction seen", newTestHistory("a", "b").
			op(0, 0, 10, "MULTI SET a 1 SET b 1 EXEC", arr(ok, ok)).op(1, 1, 2, "MULTI GET a GET b EXEC", arr(one, nilReply)),
			Fail, []string{"MULTI SET a 1 SET b 1 EXEC", "MULTI GET a GET b EXEC"}, 0},
		{"half a transaction seen by a read of one key", newTestHistory("a", "b").
			op(0, 0, 10, "MULTI SET a 1 SET b 1 EXEC", arr(ok, ok)).op(1, 1, 2, "GET a", one).op(1, 3, 4, "GET b", nilReply),
			Fail, []string{"MULTI SET a 1 SET b 1 EXEC", "GET a", "GET b"}, 0},
		{"transaction of unknown outcome applied whole", newTestHistory("a", "b").
			lost(0, 0, 1, "MULTI SET a 1 SET b 2 EXEC").op(1, 5, 6, "MGET a b", arr(one, two)), Pass, nil, 0},
		{"transaction of unknown outcome applied in half", newTestHistory("a", "b").
			lost(0, 0, 1, "MULTI SET a 1 SET b 2 EXEC").op(1, 5, 6, "MGET a b", arr(one, nilReply)), Fail, nil, 0},
		{"transaction write lost", newTestHistory("a", "b").
			op(0, 0, 1, "MULTI SET a 1 GET b DEL b SET b 2 EXEC", arr(ok, nilReply, intReply(0), ok)).
			final(5, "a", one).final(5, "b", nilReply), Fail, nil, 1},
		{"deadlines", newTestHistory("a").
			op(0, 0, 1, "SET a 1", ok).op(0, 2, 3, "EXPIRE a 1000000", intReply(1)).op(1, 2, 5, "TTL a", intReply(-1)).
			op(1, 6, 7, "TTL a", intReply(999_999)).op(0, 8, 9, "SET a 2", ok).op(1, 10, 11, "PERSIST a", intReply(0)).
			op(1, 12, 13, "TTL a", intReply(-1)).op(0, 14, 15, "DEL a", intReply(1)).op(1, 16, 17, "TTL a", intReply(-2)).
			final(18, "a", nilReply), Pass, nil, 0},
		{"deadline lost", newTestHistory("a").
			op(0, 0, 1, "SET a 1", ok).op(0, 2, 3, "EXPIRE a 1000000", intReply(1)).op(1, 4, 5, "TTL a", intReply(-1)),
			Fail, []string{"SET a 1", "EXPIRE a 1000000", "TTL a"}, 0},
		{"deadline kept by SET", newTestHistory("a").
			op(0, 0, 1, "SET a 1", ok).op(0, 2, 3, "EXPIRE a 1000000", intReply(1)).op(0, 4, 5, "SET a 2", ok).
			op(1, 6, 7, "PERSIST a", intReply(1)),
			Fail, []string{"SET a 2", "PERSIST a"}, 0},
		{"deadline of unknown outcome", newTestHistory("a").
			op(0, 0, 1, "SET a 1", ok).lost(0, 2, 3, "EXPIRE a 1000000").op(1, 4, 5, "TTL a", intReply(999_999)).
			op(1, 6, 7, "PERSIST a", intReply(1)).op(1, 8, 9, "TTL a", intReply(-1)).final(10, "a", one), Pass, nil, 0},
		{"unknown write applied", newTestHistory("a").
			lost(0, 0, 1, "SET a 1").op(1, 5, 6, "GET a", one), Pass, nil, 0},
		{"unknown write not applied", newTestHistory("a").
			lost(0, 0, 1, "SET a 1").op(1, 5, 6, "GET a", nilReply).final(7, "a", nilReply), Pass, nil, 0},
		{"unknown write seen, then undone", newTestHistory("a").
			op(0, 0, 1, "SET a 1", ok).lost(0, 2, 3, "SET a 2").op(1, 4, 5, "GET a", two).op(1, 6, 7, "GET a", one),
			Fail, []string{"SET a 2", "GET a", "GET a"}, 0},
		{"unknown read left out", newTestHistory("a").
			op(0, 0, 1, "SET a 1", ok).lost(1, 2, 3, "GET a"), Pass, nil, 0},
		{"lost write", newTestHistory("a").
			op(0, 0, 1, "SET a 1", ok).final(5, "a", nilReply),
			Fail, []string{"SET a 1", "GET a"}, 1},
		{"last write not certain", newTestHistory("a").
			op(0, 0, 1, "SET a 1", ok).lost(1, 0, 2, "DEL a").final(5, "a", nilReply), Pass, nil, 0},
		{"unknown write may come after the last acknowledged one", newTestHistory("a").
			lost(1, 0, 1, "SET a 2").op(0, 2, 3, "SET a 1", ok).final(5, "a", two), Pass, nil, 0},
		{"neither write shows", newTestHistory("a").
			lost(1, 0, 1, "SET a 2").op(0, 2, 3, "SET a 1", ok).final(5, "a", nilReply),
			Fail, []string{"SET a 2", "SET a 1", "GET a"}, 0},
		{"range", newTestHistory("a", "b", "c").
			op(0, 0, 1, "MSET a 1 c 2", ok).op(1, 2, 3, "RANGE a c", arr(strReply("a"), one, strReply("c"), two)).
			op(1, 4, 5, "RANGE a c LIMIT 1", arr(strReply("a"), one)).op(1, 6, 7, "RANGE b c", arr(strReply("c"), two)), Pass, nil, 0},
		{"range misses a key", newTestHistory("a", "b", "c").
			op(0, 0, 1, "MSET a 1 c 2", ok).op(1, 2, 3, "RANGE a c", arr(strReply("c"), two)),
			Fail, []string{"MSET a 1 c 2", "RANGE a c"}, 0},
		{"incr", newTestHistory("n").
			op(0, 0, 1, "INCR n", intReply(1)).op(1, 0, 3, "INCR n", intReply(2)).op(0, 4, 5, "GET n", two), Pass, nil, 0},
		{"incr twice the same", newTestHistory("n").
			op(0, 0, 1, "INCR n", intReply(1)).op(1, 2, 3, "INCR n", intReply(1)),
			Fail, []string{"INCR n", "INCR n"}, 0},
		{"line client", newTestHistory("a").
			op(0, 0, 1, "PUT a 1", notFoundReply).op(1, 2, 3, "PUT a 2", foundReply).op(2, 2, 5, "GET a", two).
			op(0, 6, 7, "DELETE a", foundReply).op(1, 8, 9, "DELETE a", notFoundReply).op(2, 8, 9, "SWAP a 3", nilReply).
			final(10, "a", strReply("3")), Pass, nil, 0},
		{"put not_found after an acknowledged put", newTestHistory("a").
			op(0, 0, 1, "PUT a 1", notFoundReply).op(1, 2, 3, "PUT a 2", notFoundReply),
			Fail, []string{"PUT a 1", "PUT a 2"}, 0},
		{"put found of a key never written", newTestHistory("a").
			op(0, 0, 1, "PUT a 1", foundReply), Fail, []string{"PUT a 1"}, 0},
		{"delete found twice", newTestHistory("a").
			op(0, 0, 1, "PUT a 1", notFoundReply).op(1, 2, 3, "DELETE a", foundReply).op(2, 4, 5, "DELETE a", foundReply),
			Fail, []string{"DELETE a", "DELETE a"}, 0},
		{"delete not_found of a key put before", newTestHistory("a").
			op(0, 0, 1, "PUT a 1", notFoundReply).op(1, 2, 3, "DELETE a", notFoundReply),
			Fail, []string{"PUT a 1", "DELETE a"}, 0},
		{"concurrent puts both found not_found", newTestHistory("a").
			op(0, 0, 10, "PUT a 1", notFoundReply).op(1, 1, 9, "PUT a 2", notFoundReply),
			Fail, nil, 0},
		{"concurrent put and delete", newTestHistory("a").
			op(0, 0, 1, "PUT a 1", notFoundReply).op(1, 2, 10, "PUT a 2", notFoundReply).op(2, 3, 9, "DELETE a", foundReply),
			Pass, nil, 0},
		{"lost put", newTestHistory("a").
			op(0, 0, 1, "PUT a 1", notFoundReply).final(5, "a", nilReply),
			Fail, []string{"PUT a 1", "GET a"}, 1},
		{"lost delete", newTestHistory("a").
			op(0, 0, 1, "PUT a 1", notFoundReply).op(0, 2, 3, "DELETE a", foundReply).final(5, "a", one),
			Fail, nil, 1},
		// Only a reply that shows a value bounds the unknown write of it.
		{"a found that spells a value shows no write", newTestHistory("a", "b").
			lost(0, 0, 1, "PUT a found").op(1, 0, 1, "PUT b 1", notFoundReply).op(1, 2, 3, "PUT b 2", foundReply).
			op(2, 5, 6, "GET a", nilReply),
			Pass, nil, 0},
		{"unexpected error reply is an unknown outcome", newTestHistory("a").
			op(0, 0, 1, "SET a 1", errReply("ERR fsync failed")).op(1, 2, 3, "GET a", one), Pass, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.h.check(t)
			if res.Verdict != tc.want {
				t.Fatalf("verdict %s, want %s", res.Verdict, tc.want)
			}
			if got := windowCmds(res); tc.window != nil && !reflect.DeepEqual(got, tc.window) {
				t.Errorf("smallest failing window %q, want %q", got, tc.window)
			}
			if len(res.lost) != tc.lost {
				t.Errorf("%d lost writes, want %d", len(res.lost), tc.lost)
			}
		})
	}
}

// TestCheckTimeLimit: a search out of time is UNKNOWN, never PASS.
func TestCheckTimeLimit(t *testing.T) {
	b := newTestHistory("a").op(0, 0, 1, "SET a 1", okReply).op(1, 2, 3, "GET a", strReply("1"))
	res, err := check(b.h, time.Nanosecond)
	if err != nil || res.Verdict != Unknown {
		t.Fatalf("verdict %v (%v), want UNKNOWN", res.Verdict, err)
	}
}

func TestHistoryFile(t *testing.T) {
	b := newTestHistory("a", "b", "n").
		op(0, 0, 1, "MSET a 1 b 2", okReply).
		op(1, 2, 3, "RANGE a b", arr(strReply("a"), strReply("1"), strReply("b"), strReply("2"))).
		op(1, 4, 5, "RANGE a a LIMIT 1", arr()).
		op(2, 4, 6, "INCR n", errReply(errNotInteger)).
		op(2, 7, 8, "CAS a 1 3", intReply(1)).
		op(0, 8, 9, "PUT b 5", foundReply).
		op(1, 8, 9, "DELETE a", notFoundReply).
		lost(0, 9, 20, "SET b 4").
		final(30, "a", nilReply)
	b.h.Faults = []faultSpan{{Kind: "kill", Start: 10, End: 15}}
	path := filepath.Join(t.TempDir(), "history.json")
	if err := b.h.save(path); err != nil {
		t.Fatal(err)
	}
	h, err := loadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	// %+v shows every field, and an empty array as nil does.
	if got, want := fmt.Sprintf("%+v", h), fmt.Sprintf("%+v", b.h); got != want {
		t.Errorf("loaded\n%s\nsaved\n%s", got, want)
	}
	for _, bad := range []string{
		`{"version": 2, "keys": [], "ops": []}`,
		`{"version": 1, "keys": ["b", "a"], "ops": []}`,
		`{"version": 1, "clients": 1, "keys": ["a"], "ops": [{"client": 0, "call": 1, "return": 2, "cmd": ["GET", "a"]}]}`,
		`{"version": 1, "clients": 1, "keys": ["a"], "ops": [{"client": 0, "call": 3, "return": 2, "cmd": ["GET", "a"], "reply": null}]}`,
		`{"version": 1, "clients": 1, "keys": ["a"], "ops": [{"client": 0, "call": 1, "return": 2, "cmd": ["GET", "a"], "reply": {"x": 1}}]}`,
	} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := loadHistory(path); !errors.Is(err, ErrHistory) {
			t.Errorf("loading %s: %v, want ErrHistory", bad, err)
		}
	}
}
