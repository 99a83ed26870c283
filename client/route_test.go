package client

import (
	"fmt"
	"slices"
	"testing"
)

func TestParseRedirect(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		kind string
		slot int
		addr string
		ok   bool
	}{
		{"MOVED 3999 127.0.0.1:6381", "MOVED", 3999, "127.0.0.1:6381", true},
		{"MOVED 0 [::1]:7000", "MOVED", 0, "[::1]:7000", true},
		{"ASK 12 127.0.0.1:6381", "ASK", 12, "127.0.0.1:6381", true},
		{"MOVED 16384 127.0.0.1:6381", "", 0, "", false},
		{"MOVED -1 127.0.0.1:6381", "", 0, "", false},
		{"MOVED 12 nowhere", "", 0, "", false},
		{"MOVED 12", "", 0, "", false},
		{"ASKED 12 127.0.0.1:6381", "", 0, "", false},
	} {
		kind, slot, addr, ok := parseRedirect([]byte(tc.msg))
		if kind != tc.kind || slot != tc.slot || addr != tc.addr || ok != tc.ok {
			t.Errorf("parseRedirect(%q) = %q, %d, %q, %v; want %q, %d, %q, %v", tc.msg, kind, slot, addr, ok, tc.kind, tc.slot, tc.addr, tc.ok)
		}
	}
}

func TestRoutesMoved(t *testing.T) {
	two := routes{{first: 0, last: 99, addr: "a"}, {first: 200, last: numSlots - 1, addr: "b"}}
	three := routes{ // a sharded map as CLUSTER SLOTS gives it, with each range's nodes
		{first: 0, last: 99, addr: "a", nodes: []string{"a", "a2"}},
		{first: 100, last: 199, addr: "b", nodes: []string{"b", "b2"}},
		{first: 200, last: numSlots - 1, addr: "c", nodes: []string{"c"}},
	}
	for _, tc := range []struct {
		r    routes
		slot int
		to   string
		want string
	}{
		{nil, 5, "x", "[0-16383@x]"}, // nothing known: one group serves all
		{routes{{first: 0, last: numSlots - 1, addr: "a", nodes: []string{"a"}}}, 866, "x", "[0-16383@x]"}, // the one group's new leader
		{two, 50, "x", "[0-99@x 200-16383@b]"},                                  // no nodes known: the range moves
		{two, 150, "x", "[0-99@a 150-150@x 200-16383@b]"},                       // in no range: the slot alone
		{three, 150, "b2", "[0-99@a 100-199@b2 200-16383@c]"},                   // a node of the range: its new leader
		{three, 150, "c", "[0-99@a 100-149@b 150-150@c 151-199@b 200-16383@c]"}, // another group's: the slot moved
		{three, 100, "c", "[0-99@a 100-100@c 101-199@b 200-16383@c]"},
		{three, 199, "a", "[0-99@a 100-198@b 199-199@a 200-16383@c]"},
	} {
		r := slices.Clone(tc.r).moved(tc.slot, tc.to) // moved may change its receiver
		if got := fmt.Sprint(r); got != tc.want {
			t.Errorf("%v.moved(%d, %s) = %s, want %s", tc.r, tc.slot, tc.to, got, tc.want)
		}
		if addr, ok := r.lookup(tc.slot); !ok || addr != tc.to {
			t.Errorf("after moved(%d), lookup = %q, %v; want %s", tc.slot, addr, ok, tc.to)
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
		want string // routes, their nodes and addresses, or "bad"
	}{
		{"one group", arr(rng(0, 16383, node("10.0.0.1", 7000), node("", 7001))),
			"[0-16383@10.0.0.1:7000] [[10.0.0.1:7000 seed:7001]] [10.0.0.1:7000 seed:7001]"},
		{"sorted", arr(rng(100, 16383, node("b", 1)), rng(0, 99, node("a", 1))),
			"[0-99@a:1 100-16383@b:1] [[a:1] [b:1]] [b:1 a:1]"},
		{"overlap", arr(rng(0, 100, node("a", 1)), rng(100, 200, node("b", 1))), "bad"},
		{"past the last slot", arr(rng(0, 16384, node("a", 1))), "bad"},
		{"no master", arr(rng(0, 1)), "bad"},
		{"empty", arr(), "bad"},
		{"an error", Value{Kind: KindError, Str: []byte("ERR unknown command 'CLUSTER'")}, "bad"},
	} {
		r, addrs, ok := parseSlots(tc.v, "seed:6379")
		got := "bad"
		if ok {
			var nodes [][]string
			for _, sr := range r {
				nodes = append(nodes, sr.nodes)
			}
			got = fmt.Sprint(r, nodes, addrs)
		}
		if got != tc.want {
			t.Errorf("%s: parseSlots = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestRefusalOf(t *testing.T) {
	for msg, want := range map[string]refusal{
		"MOVED 1 a:1": movedTo, "MOVED garbage": accepted, "TRYAGAIN x": busy, "CLUSTERDOWN The cluster is down": busy,
		"READONLY You can't write against a read only replica.": busy, "LOADING": busy, "ERR x": accepted,
		"ASK 1 a:1": askedTo, "ASK x": accepted, "CROSSSLOT Keys in request don't hash to the same slot": accepted,
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
	c.mu.routes = routes{{first: 0, last: numSlots - 1, addr: "leader:1"}}
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
