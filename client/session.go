package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/flintkv/flint/internal/backoff"
)

// sessionWrites names the commands that a Client with sessions sends in
// FLINT.SEQ: the server's write commands. Any other command goes as it is.
var sessionWrites = map[string]bool{
	"SET": true, "SETNX": true, "GETSET": true, "SWAP": true, "CAS": true,
	"MSET": true, "MSETNX": true, "DEL": true, "INCR": true, "DECR": true,
	"INCRBY": true, "DECRBY": true, "APPEND": true, "FLUSHDB": true, "FLUSHALL": true,
}

// sessions is the Client's client session (see Sessions in the package
// doc). It is used only with WithSessions.
type sessions struct {
	cur  atomic.Pointer[session] // nil until one is open, and again once it expired
	off  atomic.Bool             // the server has no sessions: writes go as they are
	open chan struct{}           // capacity 1: held while opening, so one opens at a time
}

// session is one open session and the sequence numbers of its writes.
type session struct {
	id uint64
	mu struct {
		sync.Mutex
		next uint64 // the number the next write gets; the first is 1
		// sent holds the numbers given to writes whose calls have not
		// returned yet: at most one per command of the calls under way.
		// Invariant: low is the least number in sent, or next if sent is
		// empty, so every number below low has been answered (or given up).
		sent map[uint64]struct{}
		low  uint64
	}
}

func newSession(id uint64) *session {
	s := &session{id: id}
	s.mu.next, s.mu.low = 1, 1
	s.mu.sent = make(map[uint64]struct{})
	return s
}

// issue gives n writes the numbers first to first+n-1, and returns first
// and the lowest unacknowledged number to send with them.
func (s *session) issue(n int) (first, low uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first = s.mu.next
	for i := range uint64(n) {
		s.mu.sent[first+i] = struct{}{}
	}
	s.mu.next += uint64(n)
	return first, s.mu.low
}

// done forgets the numbers first to first+n-1, whose call returned: the
// server may drop their replies from now on.
func (s *session) done(first uint64, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range uint64(n) {
		delete(s.mu.sent, first+i)
	}
	for s.mu.low < s.mu.next {
		if _, ok := s.mu.sent[s.mu.low]; ok {
			break
		}
		s.mu.low++
	}
}

// call runs req as exec does, in the Client's session if it has one: each
// write goes in FLINT.SEQ with a number of its own, which a resend keeps,
// so that the server applies it once however often it is sent.
func (c *Client) call(ctx context.Context, req request) ([]Value, error) {
	return c.callIn(ctx, req, false)
}

// callIn is call. A single write that its session refused as expired, in
// the only send that may have applied it, is sent once more in a new
// session, unless retried says this is that second call.
func (c *Client) callIn(ctx context.Context, req request, retried bool) ([]Value, error) {
	if !c.opts.sessions || c.sess.off.Load() {
		return c.exec(ctx, req)
	}
	n := countWrites(req)
	if n == 0 {
		return c.exec(ctx, req)
	}
	s, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	if s == nil { // the server has no sessions
		return c.exec(ctx, req)
	}
	first, low := s.issue(n)
	replies, resent, err := c.execResent(ctx, s.wrap(req, first, low))
	s.done(first, n)
	if err != nil {
		return nil, err
	}
	for _, v := range replies {
		if !v.IsError() || !bytes.HasPrefix(v.Str, []byte("SESSIONEXPIRED")) {
			continue
		}
		c.sess.cur.CompareAndSwap(s, nil) // the next write opens a new one
		rerr := &ReplyError{Msg: string(v.Str)}
		switch {
		case resent:
			return nil, fmt.Errorf("%w: client session %d expired before the write was answered (later writes go in a new session): %w",
				ErrUnknownOutcome, s.id, rerr)
		case req.len() == 1 && !retried:
			return c.callIn(ctx, req, true) // refused, so not applied: send it in a new session
		}
		return nil, fmt.Errorf("client: client session %d had expired, and the writes it refused were not applied (later writes go in a new session): %w", s.id, rerr)
	}
	return replies, nil
}

// wrap returns req with each write in FLINT.SEQ, numbered from first on.
func (s *session) wrap(req request, first, low uint64) request {
	var out request
	if req.ends != nil {
		out.ends = make([]int, 0, len(req.ends))
	}
	id, lowArg := strconv.FormatUint(s.id, 10), strconv.FormatUint(low, 10)
	for i := range req.len() {
		cmd := req.command(i)
		if n, body, name := splitCommand(cmd); sessionWrites[name] {
			out.cmd = appendArgsN(out.cmd, n+4, "FLINT.SEQ", id, strconv.FormatUint(first, 10), lowArg)
			out.cmd = append(out.cmd, body...)
			first++
		} else {
			out.cmd = append(out.cmd, cmd...)
		}
		if out.ends != nil {
			out.ends = append(out.ends, len(out.cmd))
		}
	}
	return out
}

// countWrites returns how many of req's commands go in FLINT.SEQ.
func countWrites(req request) int {
	n := 0
	for i := range req.len() {
		if _, _, name := splitCommand(req.command(i)); sessionWrites[name] {
			n++
		}
	}
	return n
}

// splitCommand returns the number of arguments of an encoded command, the
// encoding of those arguments (its header cut off), and its upper-cased
// name, or "" if the command is not an array of bulk strings as the
// package encodes them.
func splitCommand(cmd []byte) (n int, body []byte, name string) {
	i := bytes.IndexByte(cmd, '\n')
	if i < 2 || cmd[0] != '*' {
		return 0, nil, ""
	}
	n, err := strconv.Atoi(string(cmd[1 : i-1]))
	body = cmd[i+1:]
	j := bytes.IndexByte(body, '\n')
	if err != nil || j < 2 || body[0] != '$' {
		return 0, nil, ""
	}
	l, err := strconv.Atoi(string(body[1 : j-1]))
	if err != nil || l < 0 || j+1+l > len(body) {
		return 0, nil, ""
	}
	return n, body, strings.ToUpper(string(body[j+1 : j+1+l]))
}

// session returns the open session, opening one if there is none, or nil
// if the server has no sessions. The error says why no session could be
// opened; the write that needed it was not sent.
func (c *Client) session(ctx context.Context) (*session, error) {
	if s := c.sess.cur.Load(); s != nil {
		return s, nil
	}
	select {
	case c.sess.open <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("client: request not sent: waiting for a session: %w", ctx.Err())
	}
	defer func() { <-c.sess.open }()
	if s := c.sess.cur.Load(); s != nil || c.sess.off.Load() {
		return s, nil
	}
	wait := backoff.Default()
	for {
		v, err := c.exec(ctx, request{cmd: appendArgs(nil, "FLINT.SESSION")})
		switch {
		case err != nil && errors.Is(err, ErrUnknownOutcome):
			// The user's write was not sent, whatever became of FLINT.SESSION.
			return nil, fmt.Errorf("%w: request not sent: opening a session: %v", ErrConnect, err)
		case err != nil:
			return nil, fmt.Errorf("client: request not sent: opening a session: %w", err)
		case v[0].IsError() && bytes.Contains(v[0].Str, []byte("too many sessions opened")):
			if werr := wait.Wait(ctx); werr != nil {
				return nil, fmt.Errorf("client: request not sent: opening a session: %w", werr)
			}
			continue
		}
		return c.opened(v[0])
	}
}

// opened handles the reply to FLINT.SESSION.
func (c *Client) opened(v Value) (*session, error) {
	if v.Kind == KindInt && v.Int > 0 {
		s := newSession(uint64(v.Int))
		c.sess.cur.Store(s)
		return s, nil
	}
	if v.IsError() && noSessions(v.Str) {
		c.sess.off.Store(true)
		return nil, nil
	}
	if v.IsError() {
		return nil, fmt.Errorf("client: request not sent: opening a session: %w", &ReplyError{Msg: string(v.Str)})
	}
	return nil, fmt.Errorf("client: request not sent: opening a session: %w", unexpected("a positive integer", v))
}

// noSessions reports whether an error reply to FLINT.SESSION says that the
// server has no sessions: it does not know the command (Redis, an older
// Flint), or it runs without the replicated log that sessions live in.
func noSessions(msg []byte) bool {
	return bytes.HasPrefix(msg, []byte("ERR unknown command")) || bytes.Contains(msg, []byte("sessions need the replicated log"))
}
