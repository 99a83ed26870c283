package client

import (
	"errors"
	"testing"
)

// TestAbortedAfterResend: an EXECABORT is final in a call that sent no
// write twice, and an unknown outcome in one that did, since it tells only
// of the last attempt.
func TestAbortedAfterResend(t *testing.T) {
	var b Batch
	b.Do("MULTI")
	b.Set("k", []byte("v"))
	b.Do("EXEC")
	b.Get("k")
	req := request{cmd: b.cmd, ends: b.ends}
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
