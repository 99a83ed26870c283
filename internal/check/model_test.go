package check

import (
	"slices"
	"strings"
	"testing"
)

// testKeys are the keys of the model tests, sorted.
var testKeys = []string{"a", "b", "c", "n"}

// cells parses a state written as "a=x b=nil c=? d=y+ttl e=z+ttl?": every
// key of testKeys, absent unless given; +ttl is a deadline, +ttl? an
// unknown one.
func cells(t *testing.T, s string) []cell {
	t.Helper()
	st := make([]cell, len(testKeys))
	for f := range strings.FieldsSeq(s) {
		k, v, _ := strings.Cut(f, "=")
		i := indexOf(t, k)
		switch v {
		case "nil":
			st[i] = cell{}
		case "?":
			st[i] = unknownKey
		default:
			v, dl, _ := strings.Cut(v, "+")
			st[i] = value(v)
			st[i].deadline = map[string]deadlineState{"": noDeadline, "ttl": hasDeadline, "ttl?": unknownDeadline}[dl]
		}
	}
	return st
}

func indexOf(t *testing.T, key string) int {
	t.Helper()
	for i, k := range testKeys {
		if k == key {
			return i
		}
	}
	t.Fatalf("no test key %q", key)
	return -1
}

// testInput binds a command given as one string to testKeys' cells.
func testInput(t *testing.T, cmd string) *input {
	t.Helper()
	c, err := parseCommand(strings.Fields(cmd))
	if err != nil {
		t.Fatal(err)
	}
	foot, err := footprint(testKeys, c)
	if err != nil {
		t.Fatal(err)
	}
	return newInput(c, cmd, testKeys, foot, testKeys)
}

func arr(elems ...reply) reply { return reply{kind: replyArr, elems: elems} }

func TestStep(t *testing.T) {
	none := reply{}
	for _, tc := range []struct {
		state, cmd string
		out        reply
		ok         bool
		after      string // state after, if ok
	}{
		{"a=x", "GET a", strReply("x"), true, "a=x"},
		{"a=x", "GET a", nilReply, false, ""},
		{"", "GET a", nilReply, true, ""},
		{"a=?", "GET a", strReply("y"), true, "a=y+ttl?"},
		{"a=?", "GET a", nilReply, true, "a=nil"},
		{"a=x", "GET a", intReply(1), false, ""},

		{"a=x", "SET a v", okReply, true, "a=v"},
		{"a=x", "SET a v", nilReply, false, ""},
		{"a=x", "SET a v NX", nilReply, true, "a=x"},
		{"a=x", "SET a v NX", okReply, false, ""},
		{"", "SET a v NX", okReply, true, "a=v"},
		{"", "SET a v XX", nilReply, true, ""},
		{"a=x", "SET a v XX", okReply, true, "a=v"},
		{"a=?", "SET a v XX", nilReply, true, "a=nil"},
		{"a=?", "SET a v NX", nilReply, true, "a=?"},
		{"a=?", "SET a v NX", okReply, true, "a=v"},
		{"a=x", "SET a v GET", strReply("x"), true, "a=v"},
		{"a=x", "SET a v GET", nilReply, false, ""},
		{"a=x", "SET a v NX GET", strReply("x"), true, "a=x"},
		{"", "SET a v NX GET", nilReply, true, "a=v"},
		{"a=?", "SET a v XX GET", nilReply, true, "a=nil"},
		{"a=?", "SET a v XX GET", strReply("w"), true, "a=v"},

		{"", "SWAP a v", nilReply, true, "a=v"},
		{"a=x", "SWAP a v", strReply("x"), true, "a=v"},
		{"a=x", "SWAP a v", strReply("y"), false, ""},

		{"a=x", "CAS a x y", intReply(1), true, "a=y"},
		{"a=x", "CAS a x y", intReply(0), false, ""},
		{"a=z", "CAS a x y", intReply(0), true, "a=z"},
		{"", "CAS a x y", intReply(0), true, ""},
		{"a=z", "CAS a x y", intReply(1), false, ""},
		{"a=?", "CAS a x y", intReply(1), true, "a=y"},
		{"a=?", "CAS a x y", intReply(0), true, "a=?"},

		{"a=x", "DEL a b", intReply(1), true, ""},
		{"a=x", "DEL a b", intReply(2), false, ""},
		{"a=x b=?", "DEL a b", intReply(2), true, ""},
		{"a=x b=?", "DEL a b", intReply(0), false, ""},

		{"", "INCR n", intReply(1), true, "n=1"},
		{"n=41", "INCR n", intReply(42), true, "n=42"},
		{"n=41", "INCR n", intReply(41), false, ""},
		{"n=x", "INCR n", errReply(errNotInteger), true, "n=x"},
		{"n=07", "INCR n", errReply(errNotInteger), true, "n=07"},
		{"n=9223372036854775807", "INCR n", errReply(errOverflow), true, "n=9223372036854775807"},
		{"n=?", "INCR n", intReply(5), true, "n=5+ttl?"},
		{"n=?", "INCR n", errReply(errNotInteger), true, "n=?"},

		{"a=x", "MSET a 1 b 2", okReply, true, "a=1 b=2"},
		{"a=x", "MGET a b", arr(strReply("x"), nilReply), true, "a=x"},
		{"a=x", "MGET a b", arr(strReply("x")), false, ""},
		{"a=? b=?", "MGET a b", arr(strReply("x"), nilReply), true, "a=x+ttl? b=nil"},

		{"a=1 c=3", "RANGE a c", arr(strReply("a"), strReply("1"), strReply("c"), strReply("3")), true, "a=1 c=3"},
		{"a=1 c=3", "RANGE a c", arr(strReply("c"), strReply("3")), false, ""},
		{"a=1 c=3", "RANGE a c LIMIT 1", arr(strReply("a"), strReply("1")), true, "a=1 c=3"},
		{"a=1 c=3", "RANGE a c LIMIT 2", arr(strReply("a"), strReply("1")), false, ""},
		{"a=1 c=3", "RANGE b c", arr(strReply("c"), strReply("3")), true, "a=1 c=3"},
		{"a=1", "RANGE a c", arr(strReply("a"), strReply("1"), strReply("zz"), strReply("9")), false, ""},
		{"a=? b=? c=?", "RANGE a c", arr(strReply("b"), strReply("2")), true, "a=nil b=2+ttl? c=nil"},
		{"a=? b=? c=?", "RANGE a c LIMIT 1", arr(strReply("b"), strReply("2")), true, "a=nil b=2+ttl? c=?"},

		// The line client's PUT and DELETE answer whether the key had a
		// value, and nothing else.
		{"", "PUT a v", notFoundReply, true, "a=v"},
		{"a=x", "PUT a v", foundReply, true, "a=v"},
		{"a=x", "PUT a v", notFoundReply, false, ""},
		{"", "PUT a v", foundReply, false, ""},
		{"a=?", "PUT a v", foundReply, true, "a=v"},
		{"a=?", "PUT a v", notFoundReply, true, "a=v"},
		{"a=x", "PUT a v", strReply("x"), false, ""},
		{"a=x", "PUT a v", okReply, false, ""},
		{"a=x", "DELETE a", foundReply, true, ""},
		{"", "DELETE a", notFoundReply, true, ""},
		{"a=x", "DELETE a", notFoundReply, false, ""},
		{"", "DELETE a", foundReply, false, ""},
		{"a=? b=y", "DELETE a", foundReply, true, "b=y"},
		{"a=?", "DELETE a", notFoundReply, true, ""},
		{"a=x", "DELETE a", intReply(1), false, ""},

		// A transaction: its commands one after the other, at once.
		{"a=x", "MULTI GET a SET a y GET a DEL b INCR n EXEC", arr(strReply("x"), okReply, strReply("y"), intReply(0), intReply(1)), true, "a=y n=1"},
		{"a=x", "MULTI SET a y GET a EXEC", arr(okReply, strReply("x")), false, ""},
		{"a=x b=y", "MULTI SET a 1 SET b 1 EXEC", arr(okReply, okReply), true, "a=1 b=1"},
		{"a=x", "MULTI SET a 1 SET b 1 EXEC", arr(okReply), false, ""},
		{"a=?", "MULTI GET a SET b 1 EXEC", arr(nilReply, okReply), true, "a=nil b=1"},
		{"n=x", "MULTI INCR n SET a 1 EXEC", arr(errReply(errNotInteger), okReply), true, "n=x a=1"},
		{"a=x", "MULTI SET a 1 DEL a EXEC", errReply("EXECABORT Transaction discarded because of previous errors."), false, ""},

		// Expiry: EXPIRE is far longer than any run, so TTL tells only
		// whether the key is there and has a deadline. SET, SWAP, CAS and
		// MSET clear a deadline; INCR keeps it; DEL takes it with the key.
		{"a=x", "EXPIRE a 1000000", intReply(1), true, "a=x+ttl"},
		{"", "EXPIRE a 1000000", intReply(1), false, ""},
		{"", "EXPIRE a 1000000", intReply(0), true, ""},
		{"a=x", "EXPIRE a 1000000", intReply(0), false, ""},
		{"a=?", "EXPIRE a 1000000", intReply(0), true, ""},
		{"a=?", "EXPIRE a 1000000", intReply(1), true, "a=?"},
		{"a=x", "EXPIRE a 1000000", okReply, false, ""},
		{"a=x+ttl", "PERSIST a", intReply(1), true, "a=x"},
		{"a=x", "PERSIST a", intReply(1), false, ""},
		{"a=x", "PERSIST a", intReply(0), true, "a=x"},
		{"a=x+ttl", "PERSIST a", intReply(0), false, ""},
		{"", "PERSIST a", intReply(0), true, ""},
		{"", "PERSIST a", intReply(1), false, ""},
		{"a=x+ttl?", "PERSIST a", intReply(1), true, "a=x"},
		{"a=x+ttl?", "PERSIST a", intReply(0), true, "a=x"},
		{"", "TTL a", intReply(-2), true, ""},
		{"a=x", "TTL a", intReply(-2), false, ""},
		{"a=x", "TTL a", intReply(-1), true, "a=x"},
		{"a=x+ttl", "TTL a", intReply(-1), false, ""},
		{"a=x+ttl", "TTL a", intReply(999_998), true, "a=x+ttl"},
		{"a=x+ttl", "TTL a", intReply(1_000_000), true, "a=x+ttl"},
		{"a=x+ttl", "TTL a", intReply(1_000_001), false, ""},
		{"a=x+ttl", "TTL a", intReply(0), false, ""},
		{"a=x", "TTL a", intReply(5), false, ""},
		{"", "TTL a", intReply(-1), false, ""},
		{"a=?", "TTL a", intReply(-2), true, ""},
		{"a=?", "TTL a", intReply(7), true, "a=?"},
		{"a=x+ttl?", "TTL a", intReply(7), true, "a=x+ttl"},
		{"a=x+ttl?", "TTL a", intReply(-1), true, "a=x"},
		{"a=x+ttl", "TTL a", strReply("7"), false, ""},
		{"a=x+ttl", "SET a v", okReply, true, "a=v"},
		{"a=x+ttl", "SET a v NX", nilReply, true, "a=x+ttl"},
		{"a=x+ttl", "SET a v GET", strReply("x"), true, "a=v"},
		{"a=x+ttl", "SET a v NX GET", strReply("x"), true, "a=x+ttl"},
		{"a=x+ttl", "SWAP a v", strReply("x"), true, "a=v"},
		{"a=x+ttl", "CAS a x y", intReply(1), true, "a=y"},
		{"a=x+ttl", "CAS a z y", intReply(0), true, "a=x+ttl"},
		{"a=x+ttl", "MSET a 1 b 2", okReply, true, "a=1 b=2"},
		{"a=x+ttl", "DEL a", intReply(1), true, ""},
		{"n=1+ttl", "INCR n", intReply(2), true, "n=2+ttl"},
		{"n=?", "INCR n", intReply(2), true, "n=2+ttl?"},
		{"a=x+ttl", "GET a", strReply("x"), true, "a=x+ttl"},
		{"a=?", "GET a", strReply("x"), true, "a=x+ttl?"},
		{"a=x+ttl", "MULTI SET a v GET a EXEC", arr(okReply, strReply("v")), true, "a=v"},

		// Unknown outcomes: applied as they would be, unknown where that
		// depends on an unknown value.
		{"a=x", "SET a v", none, true, "a=v"},
		{"a=x", "SET a v NX", none, true, "a=x"},
		{"a=?", "SET a v NX", none, true, "a=?"},
		{"a=x", "CAS a x y", none, true, "a=y"},
		{"a=?", "CAS a x y", none, true, "a=?"},
		{"a=x b=y", "DEL a b", none, true, ""},
		{"n=2", "INCR n", none, true, "n=3"},
		{"n=?", "INCR n", none, true, "n=?"},
		{"a=?", "PUT a v", none, true, "a=v"},
		{"a=x", "DELETE a", none, true, ""},
		{"a=x n=?", "MULTI SET a 1 INCR n DEL b EXEC", none, true, "a=1 n=?"},
		{"a=x", "EXPIRE a 1000000", none, true, "a=x+ttl"},
		{"", "EXPIRE a 1000000", none, true, ""},
		{"a=x+ttl", "PERSIST a", none, true, "a=x"},
	} {
		before := cells(t, tc.state)
		ok, after := step(before, testInput(t, tc.cmd), &tc.out)
		if ok != tc.ok {
			t.Errorf("%s: %s → %v: ok %v, want %v", tc.state, tc.cmd, tc.out, ok, tc.ok)
			continue
		}
		if ok && !slices.Equal(after, cells(t, tc.after)) {
			t.Errorf("%s: %s → %v: state %v, want %s", tc.state, tc.cmd, tc.out, after, tc.after)
		}
		if !slices.Equal(before, cells(t, tc.state)) {
			t.Errorf("%s: %s changed the state it was given", tc.state, tc.cmd)
		}
	}
}
