package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/flintkv/flint/internal/backoff"
	"github.com/flintkv/flint/internal/protocol"
)

// request is the commands of one call, encoded back to back.
type request struct {
	cmd  []byte
	ends []int // ends[i] is where command i ends in cmd; nil for a single command
}

func (r request) len() int {
	if r.ends == nil {
		return 1
	}
	return len(r.ends)
}

// command returns the encoding of command i.
func (r request) command(i int) []byte {
	if r.ends == nil {
		return r.cmd
	}
	start := 0
	if i > 0 {
		start = r.ends[i-1]
	}
	return r.cmd[start:r.ends[i]]
}

// exec runs req's commands and returns their replies, error replies
// included, following MOVED and retrying refusals and failures as the
// package doc says (Failover). The first attempt goes to the target; only
// a refusal or a failure costs more.
func (c *Client) exec(ctx context.Context, req request) ([]Value, error) {
	replies, _, err := c.execResent(ctx, req)
	return replies, err
}

// execResent is exec that also reports whether a write of req was sent
// more than once after an attempt that may have taken effect: if not, a
// write's reply is the outcome of its only send that may have applied.
func (c *Client) execResent(ctx context.Context, req request) ([]Value, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("client: request not sent: %w", err)
	}
	p := c.target.Load()
	replies, err := p.send(ctx, req.cmd, req.len())
	if err == nil && settled(req, replies) {
		return replies, false, nil
	}
	rt := &retrier{c: c, req: req, replies: make([]Value, req.len()), seen: p, wait: backoff.Default()}
	rt.pending = make([]int, req.len())
	for i := range rt.pending {
		rt.pending[i] = i
	}
	replies, err = rt.run(ctx, p, replies, err)
	return replies, rt.maybe != nil, err
}

// settled reports whether every reply to req is final: none is a refusal
// or a session write to send again (see classify).
func settled(req request, replies []Value) bool {
	for i, v := range replies {
		if classify(v, req.command(i)) != accepted {
			return false
		}
	}
	return true
}

// classify returns how the client takes reply v to encoded command cmd: a
// refusal (a command the server did not run, which may be sent again, there
// or elsewhere); busy too for a write in a session (FLINT.SEQ) whose
// outcome the server could not learn (UNKNOWN), since its session makes a
// resend take effect once; else accepted, a final reply.
func classify(v Value, cmd []byte) refusal {
	if !v.IsError() {
		return accepted
	}
	if r := refusalOf(v.Str); r != accepted {
		return r
	}
	if bytes.HasPrefix(v.Str, []byte("UNKNOWN ")) && commandName(cmd) == "FLINT.SEQ" {
		return busy
	}
	return accepted
}

// retrier carries one call through its attempts after the first.
type retrier struct {
	c       *Client
	req     request
	replies []Value // each command's final reply, once it has come
	pending []int   // the commands with no final reply yet, in order
	seen    *pool   // the Client's target when the call last looked
	rotated bool    // the last attempt's pool was the member after the one before
	moved   bool    // the last attempt's pool was named by a MOVED
	last    error   // the last failure or refusal, for when the call gives up
	// maybe is why an earlier attempt of a write may have taken effect (a
	// session's write resent after its outcome was unknown), or nil: a
	// call that gives up after one must not say its writes were not sent.
	maybe error
	wait  backoff.Backoff
}

// run makes attempts until every command has its final reply or the call
// has to stop. The attempt at p gave replies or err.
func (rt *retrier) run(ctx context.Context, p *pool, replies []Value, err error) ([]Value, error) {
	for {
		var to *pool // the pool a MOVED named
		if err != nil {
			if !rt.resendable(ctx, err) {
				return nil, rt.giveUp(err)
			}
			rt.last = err
			if errors.Is(err, ErrUnknownOutcome) && !rt.readOnly() {
				rt.maybe = err
			}
		} else if to = rt.sort(p, replies); len(rt.pending) == 0 {
			return rt.replies, nil
		}
		if p, err = rt.nextPool(ctx, p, to); err != nil {
			return nil, rt.giveUp(err)
		}
		replies, err = p.send(ctx, rt.commands(), len(rt.pending))
	}
}

// sort files the replies of an attempt at p: final ones in their commands'
// places, refused commands kept pending, in order. It returns the pool a
// MOVED named, if any. A member turned to after another failed that runs a
// command becomes the Client's target.
func (rt *retrier) sort(p *pool, replies []Value) (to *pool) {
	kept, answered := rt.pending[:0], false // filtered in place: kept never passes the reading
	for i, v := range replies {
		cmd := rt.pending[i]
		r := classify(v, rt.req.command(cmd))
		switch r {
		case accepted:
			rt.replies[cmd], answered = v, true
			continue
		case movedTo:
			slot, addr, _ := parseMoved(v.Str)
			to = rt.c.moved(slot, addr)
		default:
			if refusalOf(v.Str) == accepted { // UNKNOWN, to a session's write
				rt.maybe = &ReplyError{Msg: string(v.Str)}
			}
		}
		rt.last = &ReplyError{Msg: string(v.Str)}
		kept = append(kept, cmd)
	}
	if answered && rt.rotated {
		rt.c.promote(p)
	}
	if to != nil || answered && rt.rotated {
		rt.seen = rt.c.target.Load()
	}
	rt.pending = kept
	return to
}

// nextPool returns the pool for the attempt after one at p: to, at once, if
// a MOVED named it and the attempt was not itself sent where a MOVED said;
// otherwise, after a backoff, to, or the Client's target if it changed
// since the call last looked (another call learned where the leader is),
// or else the member after p.
func (rt *retrier) nextPool(ctx context.Context, p, to *pool) (*pool, error) {
	wasMoved := rt.moved
	rt.moved, rt.rotated = to != nil, false
	if to != nil && !wasMoved {
		return to, nil
	}
	if err := rt.wait.Wait(ctx); err != nil {
		return nil, fmt.Errorf("client: gave up retrying: %w", err)
	}
	if to != nil {
		return to, nil
	}
	if t := rt.c.target.Load(); t != rt.seen {
		rt.seen = t
		return t, nil
	}
	rt.rotated = true
	return rt.c.after(p), nil
}

// commands returns the encodings of the pending commands. It builds a new
// slice each time: a connection may still be copying the last one.
func (rt *retrier) commands() []byte {
	if len(rt.pending) == rt.req.len() {
		return rt.req.cmd
	}
	var b []byte
	for _, i := range rt.pending {
		b = append(b, rt.req.command(i)...)
	}
	return b
}

// resendable reports whether the pending commands may be sent again after
// an attempt failed with err: the context has not ended, the Client is
// open, no server refused the connection for good, and the commands were
// not sent or are all reads or session commands. A write outside a
// session whose outcome is unknown is never sent again: it may have taken
// effect.
func (rt *retrier) resendable(ctx context.Context, err error) bool {
	switch {
	case ctx.Err() != nil, errors.Is(err, ErrClosed), refusedHandshake(err):
		return false
	case errors.Is(err, ErrUnknownOutcome):
		return rt.reads()
	}
	return errors.Is(err, ErrConnect)
}

// readOnly names the commands that change nothing, so that one whose
// outcome is unknown may be sent again. Any other counts as a write.
var readOnly = map[string]bool{
	"GET": true, "MGET": true, "EXISTS": true, "STRLEN": true, "RANGE": true,
	"DBSIZE": true, "PING": true, "ECHO": true,
}

// sessionCommands may be sent again too: FLINT.SEQ because the server
// answers a number it applied already with the reply it kept, and
// FLINT.SESSION because a session opened twice leaves one unused, which
// expires.
var sessionCommands = map[string]bool{"FLINT.SEQ": true, "FLINT.SESSION": true}

// reads reports whether every pending command is a read, or a session
// command, so that it may be sent again whatever its outcome.
func (rt *retrier) reads() bool {
	for _, i := range rt.pending {
		if name := commandName(rt.req.command(i)); !readOnly[name] && !sessionCommands[name] {
			return false
		}
	}
	return true
}

// readOnly reports whether every pending command is a read: one whose
// outcome does not matter.
func (rt *retrier) readOnly() bool {
	for _, i := range rt.pending {
		if !readOnly[commandName(rt.req.command(i))] {
			return false
		}
	}
	return true
}

// commandName returns the upper-cased name of an encoded command, or "" if
// it does not parse within the protocol's default limits (then it counts
// as a write).
func commandName(cmd []byte) string {
	args, _, err := protocol.NewParser(protocol.DefaultLimits).Next(cmd, nil)
	if err != nil || len(args) == 0 {
		return ""
	}
	return strings.ToUpper(string(args[0]))
}

// giveUp returns the error of a call that stops because of err, adding the
// last failure or refusal before it, which says why the call was still
// trying. It adds nothing to an err that says the outcome is unknown: an
// earlier "not sent" beside it would make a write that may have applied
// look as if it never was sent. For the same reason, once an attempt may
// have taken effect, the call's error is ErrUnknownOutcome, whatever
// became of the attempts after it (a resend that could not connect, say).
func (rt *retrier) giveUp(err error) error {
	switch {
	case errors.Is(err, ErrUnknownOutcome):
		return err
	case rt.maybe != nil:
		return fmt.Errorf("%w: an earlier attempt may have taken effect (%v), and then: %v", ErrUnknownOutcome, rt.maybe, err)
	case rt.last == nil:
		return err
	}
	return fmt.Errorf("%w; before that: %w", err, rt.last)
}
