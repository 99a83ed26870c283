package client

import (
	"errors"
	"fmt"
	"testing"
)

// TestAbortedAfterResend: an EXECABORT is final in a call that sent no
// write twice, and an unknown outcome in one that did, since it tells only
// of the last attempt.
func TestAbortedAfterResend(t *testing.T) {
	req := txThenGet()
	ok := Value{Kind: KindSimple, Str: []byte("OK")}
	abort := Value{Kind: KindError, Str: []byte("EXECABORT Transaction discarded because of previous errors.")}
	moved := Value{Kind: KindError, Str: []byte("MOVED 1 127.0.0.1:1")}
	for _, tc := range []struct {
		name    string
		replies []Value
		unknown bool
	}{
		{"applied", []Value{ok, {Kind: KindSimple, Str: []byte("QUEUED")}, {Kind: KindArray, Elems: []Value{ok}}, ok}, false},
		{"aborted", []Value{ok, moved, abort, ok}, true},
		{"an error that is not EXEC's", []Value{ok, abort, {Kind: KindArray, Elems: []Value{ok}}, abort}, false},
	} {
		err := abortedAfterResend(req, tc.replies)
		if got := errors.Is(err, ErrUnknownOutcome); got != tc.unknown {
			t.Errorf("%s: abortedAfterResend = %v, want unknown outcome %v", tc.name, err, tc.unknown)
		}
	}
}

// TestTxAskedOnce: a transaction sent after an ASK goes with one ASKING,
// before its MULTI, which holds for the whole transaction, as in Redis
// (one inside MULTI would be queued, and its reply would join EXEC's); a
// command outside the transaction gets its own.
func TestTxAskedOnce(t *testing.T) {
	req := txThenGet()
	p := &pool{addr: "127.0.0.1:1"}
	rt := newRetrier(nil, req, func(int) *pool { return p })
	for i := range rt.hops {
		rt.hops[i].via = viaAsked
	}
	legs := rt.legs()
	if len(legs) != 1 || fmt.Sprint(legs[0].asked) != "[true false false true]" {
		t.Fatalf("legs %+v, want one, asked [true false false true]", legs)
	}
}

// txThenGet returns the request of MULTI, SET k v, EXEC, GET k.
func txThenGet() request {
	var b Batch
	b.Do("MULTI")
	b.Set("k", []byte("v"))
	b.Do("EXEC")
	b.Get("k")
	return request{cmd: b.cmd, ends: b.ends}
}
