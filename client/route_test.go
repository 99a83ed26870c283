package client

import (
	"fmt"
	"slices"
	"testing"
)

func TestParseMoved(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		slot int
		addr string
		ok   bool
	}{
		{"MOVED 3999 127.0.0.1:6381", 3999, "127.0.0.1:6381", true},
		{"MOVED 0 [::1]:7000", 0, "[::1]:7000", true},
		{"MOVED 16384 127.0.0.1:6381", 0, "", false},
		{"MOVED -1 127.0.0.1:6381", 0, "", false},
		{"MOVED 12 nowhere", 0, "", false},
		{"MOVED 12", 0, "", false},
		{"ASK 12 127.0.0.1:6381", 0, "", false},
	} {
		slot, addr, ok := parseMoved([]byte(tc.msg))
		if slot != tc.slot || addr != tc.addr || ok != tc.ok {
			t.Errorf("parseMoved(%q) = %d, %q, %v; want %d, %q, %v", tc.msg, slot, addr, ok, tc.slot, tc.addr, tc.ok)
		}
	}
}

func TestRoutesMoved(t *testing.T) {
	two := routes{{0, 99, "a"}, {200, numSlots - 1, "b"}}
	for _, tc := range []struct {
		r    routes
		slot int
		want string
	}{
		{nil, 5, "[{0 16383 x}]"},                              // nothing known: one group serves all
		{routes{{0, numSlots - 1, "a"}}, 866, "[{0 16383 x}]"}, // the one group moved
		{two, 50, "[{0 99 x} {200 16383 b}]"},
		{two, 150, "[{0 99 a} {150 150 x} {200 16383 b}]"}, // in no range: the slot alone
	} {
		r := slices.Clone(tc.r).moved(tc.slot, "x") // moved may change its receiver
		if got := fmt.Sprint(r); got != tc.want {
			t.Errorf("%v.moved(%d) = %s, want %s", tc.r, tc.slot, got, tc.want)
		}
		if addr, ok := r.lookup(tc.slot); !ok || addr != "x" {
			t.Errorf("after moved(%d), lookup = %q, %v; want x", tc.slot, addr, ok)
		}
	}
}

func TestParseSlots(t *testing.T) {
	node := func(host string, port int64) Value {
		return Value{Kind: KindArray, Elems: []Value{{Kind: KindBulk, Str: []byte(host)}, {Kind: KindInt, Int: port}}}
	}
	rng := func(first, last int64, nodes ...Value) Value {
		return Value{Kind: KindArray, Elems: append([]Value{{Kind: KindInt, Int: first}, {Kind: KindInt, Int: last}}, nodes...)}
	}
	arr := func(elems ...Value) Value { return Value{Kind: KindArray, Elems: elems} }
	for _, tc := range []struct {
		name string
		v    Value
		want string // routes and addresses, or "bad"
	}{
		{"one group", arr(rng(0, 16383, node("10.0.0.1", 7000), node("", 7001))),
			"[{0 16383 10.0.0.1:7000}] [10.0.0.1:7000 seed:7001]"},
		{"sorted", arr(rng(100, 16383, node("b", 1)), rng(0, 99, node("a", 1))),
			"[{0 99 a:1} {100 16383 b:1}] [b:1 a:1]"},
		{"overlap", arr(rng(0, 100, node("a", 1)), rng(100, 200, node("b", 1))), "bad"},
		{"past the last slot", arr(rng(0, 16384, node("a", 1))), "bad"},
		{"no master", arr(rng(0, 1)), "bad"},
		{"empty", arr(), "bad"},
		{"an error", Value{Kind: KindError, Str: []byte("ERR unknown command 'CLUSTER'")}, "bad"},
	} {
		r, addrs, ok := parseSlots(tc.v, "seed:6379")
		got := "bad"
		if ok {
			got = fmt.Sprint(r, addrs)
		}
		if got != tc.want {
			t.Errorf("%s: parseSlots = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestRefusalOf(t *testing.T) {
	for msg, want := range map[string]refusal{
		"MOVED 1 a:1": movedTo, "MOVED garbage": accepted, "TRYAGAIN x": busy, "CLUSTERDOWN The cluster is down": busy,
		"READONLY You can't write against a read only replica.": busy, "LOADING": busy, "ERR x": accepted, "ASK 1 a:1": accepted,
	} {
		if got := refusalOf([]byte(msg)); got != want {
			t.Errorf("refusalOf(%q) = %d, want %d", msg, got, want)
		}
	}
}

func TestCommandName(t *testing.T) {
	for _, tc := range []struct {
		cmd  []byte
		want string
	}{
		{encGet(nil, "k"), "GET"},
		{appendArgs(nil, "range", "a", "b"), "RANGE"},
		{encSet(nil, "k", []byte("v")), "SET"},
		{[]byte("*1\r\n$3\r\nGE"), ""},
	} {
		if got := commandName(tc.cmd); got != tc.want {
			t.Errorf("commandName(%q) = %q, want %q", tc.cmd, got, tc.want)
		}
	}
}

// TestMembersBounded learns more addresses than a Client keeps: the seeds
// and the routed members stay, the oldest others go, and their pools are
// closed for good.
func TestMembersBounded(t *testing.T) {
	c := &Client{opts: options{poolSize: 1}}
	c.mu.byAddr = map[string]*pool{}
	c.addLocked("seed:1")
	c.mu.seeds = 1
	c.mu.routes = routes{{0, numSlots - 1, "leader:1"}}
	c.poolLocked("leader:1")
	first := c.poolLocked("old:1")
	for i := range 2 * maxLearned {
		c.poolLocked(fmt.Sprintf("new:%d", i))
	}
	if n := len(c.mu.members); n != 1+maxLearned || len(c.mu.byAddr) != n {
		t.Fatalf("%d members, %d indexed; want %d", n, len(c.mu.byAddr), 1+maxLearned)
	}
	for _, addr := range []string{"seed:1", "leader:1", fmt.Sprintf("new:%d", 2*maxLearned-1)} {
		if c.mu.byAddr[addr] == nil {
			t.Errorf("%s was forgotten", addr)
		}
	}
	if c.mu.byAddr["old:1"] != nil || !first.forgotten.Load() {
		t.Errorf("old:1 kept, or its pool still open")
	}
}
