package client

import (
	"fmt"
	"strings"
	"testing"

	keyslot "github.com/flintkv/flint/internal/slot"
)

func TestSlotOf(t *testing.T) {
	s := func(k string) int { return keyslot.Of([]byte(k)) }
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"GET", "somekey"}, 11058},
		{[]string{"set", "foo{hash_tag}", "v"}, 2515},
		{[]string{"DEL", "a", "b"}, s("a")},
		{[]string{"MSET", "a", "1", "b", "2"}, s("a")},
		{[]string{"BITOP", "AND", "dest", "a"}, s("dest")},
		{[]string{"FLINT.SEQ", "7", "1", "1", "BITOP", "NOT", "dest", "a"}, s("dest")},
		{[]string{"FLINT.SEQ", "7", "1", "1", "SET", "somekey", "v"}, 11058},
		{[]string{"FLINT.SEQ", "7", "1", "1", "FLUSHDB"}, -1},
		{[]string{"PING"}, -1},
		{[]string{"ECHO", "somekey"}, -1},
		{[]string{"cluster", "slots"}, -1},
		{[]string{"FLINT.SESSION"}, -1},
		{[]string{"HSET", "somekey", "f", "v"}, 11058}, // unknown: its first argument
	} {
		a := make([][]byte, len(tc.args))
		for i, x := range tc.args {
			a[i] = []byte(x)
		}
		if got := slotOf(a); got != tc.want {
			t.Errorf("slotOf(%q) = %d, want %d", tc.args, got, tc.want)
		}
		enc, _ := encAny(nil, anys(tc.args))
		if got := slotOfCommand(enc); got != tc.want {
			t.Errorf("slotOfCommand(%q) = %d, want %d", tc.args, got, tc.want)
		}
	}
	if got := slotOfCommand([]byte("*2\r\n$3\r\nGET\r\n$9\r\nsome")); got != -1 {
		t.Errorf("slotOfCommand of a cut command = %d, want -1", got)
	}
}

func anys(ss []string) []any {
	a := make([]any, len(ss))
	for i, s := range ss {
		a[i] = s
	}
	return a
}

// TestPlan splits a request in a map of three ranges: reads of several
// slots by slot, RANGE by master; the rest go whole, routed by their first
// key.
func TestPlan(t *testing.T) {
	c := &Client{opts: options{poolSize: 1}}
	c.mu.byAddr = map[string]*pool{}
	c.mu.routes = routes{
		{first: 0, last: 5460, addr: "a:1"}, {first: 5461, last: 10922, addr: "b:1"}, {first: 10923, last: numSlots - 1, addr: "c:1"},
	}
	tb := c.newTableLocked()
	var req request
	for _, cmd := range [][]any{
		{"GET", "somekey"},
		{"MGET", "a", "b", "{b}x", "c"},
		{"MGET", "{t}1", "{t}2"},
		{"RANGE", "a", "z", "LIMIT", 3},
		{"RANGE", "a"}, // not one to fan out: it goes as it is, for the member to refuse
		{"EXISTS", "a", "b"},
		{"DEL", "a", "b"},
	} {
		req.cmd, _ = encAny(req.cmd, cmd)
		req.ends = append(req.ends, len(req.cmd))
	}
	pl := plan(tb, req)
	var got []string
	for i := range pl.parts.len() {
		args, _ := parseArgs(pl.parts.command(i))
		got = append(got, fmt.Sprintf("%s@%d", args, pl.parts.slot(i)))
	}
	s := func(k string) int { return keyslot.Of([]byte(k)) }
	want := []string{
		fmt.Sprintf("[GET somekey]@%d", s("somekey")),
		fmt.Sprintf("[MGET a]@%d", s("a")), fmt.Sprintf("[MGET b {b}x]@%d", s("b")), fmt.Sprintf("[MGET c]@%d", s("c")),
		fmt.Sprintf("[MGET {t}1 {t}2]@%d", s("t")),
		"[RANGE a z LIMIT 3]@0", "[RANGE a z LIMIT 3]@5461", "[RANGE a z LIMIT 3]@10923",
		fmt.Sprintf("[RANGE a]@%d", s("a")),
		fmt.Sprintf("[EXISTS a]@%d", s("a")), fmt.Sprintf("[EXISTS b]@%d", s("b")),
		fmt.Sprintf("[DEL a b]@%d", s("a")),
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("parts\n%s\nwant\n%s", got, want)
	}
	if n := len(pl.splits); n != 3 {
		t.Fatalf("%d commands split, want 3", n)
	}
}

// TestPlanTx: MULTI and EXEC (or DISCARD, or EXEC in FLINT.SEQ), which
// have no key, go with the transaction's keyed commands, to their slot's
// member.
func TestPlanTx(t *testing.T) {
	c := &Client{opts: options{poolSize: 1}}
	c.mu.byAddr = map[string]*pool{}
	c.mu.routes = routes{{first: 0, last: 8000, addr: "a:1"}, {first: 8001, last: numSlots - 1, addr: "b:1"}}
	tb := c.newTableLocked()
	var req request
	for _, cmd := range [][]any{
		{"PING"}, {"MULTI"}, {"PING"}, {"SET", "{t}1", "v"}, {"GET", "x"}, {"EXEC"},
		{"multi"}, {"GET", "{u}1"}, {"discard"}, {"MULTI"}, {"EXEC"}, {"EXEC"},
		{"MULTI"}, {"SET", "{u}2", "v"}, {"FLINT.SEQ", 1, 2, 1, "EXEC"},
	} {
		req.cmd, _ = encAny(req.cmd, cmd)
		req.ends = append(req.ends, len(req.cmd))
	}
	pl := plan(tb, req)
	s := func(k string) int { return keyslot.Of([]byte(k)) }
	want := []int{-1, s("t"), -1, s("t"), s("x"), s("t"), s("u"), s("u"), s("u"), -1, -1, -1, s("u"), s("u"), s("u")}
	for i, w := range want {
		if got := pl.parts.slot(i); got != w {
			args, _ := parseArgs(pl.parts.command(i))
			t.Errorf("command %d %s routed by slot %d, want %d", i, args, got, w)
		}
	}
}

func TestMGetJoin(t *testing.T) {
	bulk := func(s string) Value { return Value{Kind: KindBulk, Str: []byte(s)} }
	arr := func(v ...Value) Value { return Value{Kind: KindArray, Elems: v} }
	j := mgetJoin{keyPart: []int{1, 0, 1, 2}, counts: []int{1, 2, 1}}
	got := j.join(nil, []Value{arr(bulk("k1")), arr(bulk("k0"), Value{Kind: KindNull}), arr(bulk("k3"))}, nil)
	if s := got.String(); s != `["k0" "k1" (nil) "k3"]` {
		t.Errorf("join = %s", s)
	}
	errv := Value{Kind: KindError, Str: []byte("TRYAGAIN")}
	if got := j.join(nil, []Value{arr(bulk("k1")), errv, arr(bulk("k3"))}, nil); !got.IsError() {
		t.Errorf("join with an error part = %s, want the error", got)
	}
	if got := j.join(nil, []Value{arr(bulk("k1")), arr(bulk("k0")), arr(bulk("k3"))}, nil); got.Kind != KindArray || len(got.Elems) != 1 {
		t.Errorf("join with a short part = %s, want that part, for the caller to report", got)
	}
}

// TestRangeJoin merges three groups' RANGE replies: in key order, the
// limit applied to the merge, and a key that two groups hold taken once,
// from its slot's owner.
func TestRangeJoin(t *testing.T) {
	c := &Client{opts: options{poolSize: 1}}
	c.mu.byAddr = map[string]*pool{}
	c.mu.routes = routes{{first: 0, last: 8000, addr: "a:1"}, {first: 8001, last: numSlots - 1, addr: "b:1"}}
	c.table.Store(c.newTableLocked())
	pa, pb, pc := c.mu.byAddr["a:1"], c.mu.byAddr["b:1"], c.poolLocked("c:1")
	reply := func(kvs ...string) Value {
		v := Value{Kind: KindArray}
		for _, s := range kvs {
			v.Elems = append(v.Elems, Value{Kind: KindBulk, Str: []byte(s)})
		}
		return v
	}
	// k5 is in both a's and b's replies: its slot's owner gives "new".
	fromA, fromB := "new", "old"
	if keyslot.Of([]byte("k5")) > 8000 {
		fromA, fromB = fromB, fromA
	}
	parts := []Value{reply("k1", "1", "k4", "4", "k5", fromA), reply("k2", "2", "k5", fromB, "k9", "9"), reply("k3", "3")}
	at := []*pool{pa, pb, pc}
	for _, tc := range []struct {
		j    rangeJoin
		want string
	}{
		{rangeJoin{}, `["k1" "1" "k2" "2" "k3" "3" "k4" "4" "k5" "new" "k9" "9"]`},
		{rangeJoin{limit: 4, limited: true}, `["k1" "1" "k2" "2" "k3" "3" "k4" "4"]`},
		{rangeJoin{limit: 0, limited: true}, `[]`},
	} {
		if got := tc.j.join(c, parts, at).String(); got != tc.want {
			t.Errorf("%+v: join = %s, want %s", tc.j, got, tc.want)
		}
	}
	if got := (rangeJoin{}).join(c, []Value{parts[0], {Kind: KindError, Str: []byte("CLUSTERDOWN")}}, at); !got.IsError() {
		t.Errorf("join with an error = %s, want the error", got)
	}
}
