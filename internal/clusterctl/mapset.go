package clusterctl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/ask"
	"github.com/flintkv/flint/internal/protocol"
)

// maxRedirects bounds the MOVED replies mapSet follows from one address:
// a follower names the leader, which takes FLINT.MAPSET or, if it lost
// its lead meanwhile, names the next one.
const maxRedirects = 3

// errTryAgain marks a FLINT.MAPSET that no manager could take now: none
// answered, or each said to try again (it knows no leader of its meta
// group yet, or redirected more than maxRedirects times). The caller
// tries again after a backoff, while its context allows.
var errTryAgain = errors.New("clusterctl: no manager takes the map now")

// mapSet sends FLINT.MAPSET enc to the managers at addrs, in turn, until
// one answers it, and returns that answer and the address that gave it. A manager that does not lead
// its meta group answers MOVED to the one that does, where mapSet sends it
// next, so that any one manager's address reaches the leader. It returns
// an error wrapping errTryAgain if none answered or each said to try
// again (CLUSTERDOWN, TRYAGAIN, READONLY, UNKNOWN, or no answer): the
// caller reads the map again before it does, so a change that UNKNOWN
// hides is seen made. Any other refusal is returned as is.
func mapSet(ctx context.Context, pool *ask.Pool, addrs []string, enc string) (protocol.Value, string, error) {
	var last error
	for _, addr := range addrs {
		for range maxRedirects + 1 {
			v, err := pool.One(ctx, addr, "FLINT.MAPSET", enc)
			if err == nil {
				return v, addr, nil
			}
			last = err
			if !retryable(err) && !outcomeUnknown(err) {
				return protocol.Value{}, "", err
			}
			next, ok := movedTo(err)
			if !ok {
				break
			}
			addr = next
		}
	}
	return protocol.Value{}, "", fmt.Errorf("%w (last: %v)", errTryAgain, last)
}

// movedTo returns the address that a MOVED reply names.
func movedTo(err error) (string, bool) {
	var re *client.ReplyError
	if !errors.As(err, &re) || !strings.HasPrefix(re.Msg, "MOVED ") {
		return "", false
	}
	f := strings.Fields(re.Msg)
	if len(f) != 3 {
		return "", false
	}
	return f[2], true
}

// outcomeUnknown reports whether err is the reply UNKNOWN: the leader lost
// its lead before it learned whether the write was committed.
func outcomeUnknown(err error) bool {
	var re *client.ReplyError
	return errors.As(err, &re) && strings.HasPrefix(re.Msg, "UNKNOWN ")
}
