package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
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
	"MSET": true, "MSETNX": true, "DEL": true, "UNLINK": true, "INCR": true, "DECR": true,
	"INCRBY": true, "DECRBY": true, "APPEND": true, "FLUSHDB": true, "FLUSHALL": true,
	"GETDEL": true, "INCRBYFLOAT": true, "SETRANGE": true, "SETBIT": true, "BITOP": true,
	"BITFIELD": true, "RENAME": true, "RENAMENX": true, "COPY": true,
	"SETEX": true, "PSETEX": true, "GETEX": true, "EXPIRE": true, "PEXPIRE": true, "EXPIREAT": true,
	"PEXPIREAT": true, "PERSIST": true,
}

// sessions are the Client's client sessions (see Sessions in the package
// doc), one per range of slots of the map, since each group keeps its own.
// They are used only with WithSessions.
type sessions struct {
	off atomic.Bool // the server has no sessions: writes go as they are
	mu  struct {
		sync.Mutex
		bySpan map[span]*sessionSlot
	}
}

// span is the slots first..last that one session serves: those of a range
// of a sharded map, or, as {-1, -1}, every slot of a map that is not
// sharded, or no range holds. With at set (and the slots -1), it is the
// writes that the member at, the target of a slot move, refused in the
// session of the range that the map routes them by (see callIn).
type span struct {
	first, last int
	at          string
}

// anySpan is the span of the commands that go to the target.
var anySpan = span{first: -1, last: -1}

// sessionSlot holds the session of one span.
type sessionSlot struct {
	cur  atomic.Pointer[session] // nil until one is open, and again once it expired
	open chan struct{}           // capacity 1: held while opening, so one opens at a time
}

// session is one open session and the sequence numbers of its writes.
type session struct {
	id uint64
	sp span  // the span it was opened for, in the group that serves it
	at *pool // the member that opened it
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

func newSession(id uint64, sp span, at *pool) *session {
	s := &session{id: id, sp: sp, at: at}
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

// call runs req as exec does, in the Client's sessions if it has them:
// each write (a whole transaction counting as one, see sessionWrites)
// goes in FLINT.SEQ with a number of its own in the session of its slot's
// range, which a resend keeps, so that the server applies it once however
// often it is sent.
func (c *Client) call(ctx context.Context, req request) ([]Value, error) {
	return c.callIn(ctx, req, 0, nil)
}

// sessionWrite is one write of a request and the session it goes in.
type sessionWrite struct {
	cmd int
	s   *session
	seq uint64 // its number in s
	low uint64 // s's lowest unacknowledged number when seq was given
}

// maxRefusals bounds how many sessions in turn may refuse one write as
// expired (see callIn).
const maxRefusals = 3

// callIn is call, refused being how many sessions refused req's write
// before (see below); with asked set, the write goes in the session opened
// at asked.
//
// A write refused as expired, in the only send that may have applied it,
// was applied nowhere: that send was refused, and each earlier one too. So
// it may go again as a new write, in a new session, of the group that
// refused it, since a group knows only its own sessions and those a slot
// move copied to it. After ASK that is the move's target, which refuses a
// session that the source opened after the move copied the source's
// sessions to it (docs/SHARDING.md, "Moving slots", step 5), and so every
// new session of the source's, where the map sends FLINT.SESSION until
// the client learns the map that gives the target the slots (step 8): the
// new session is then opened at the target, and the write goes where the
// map routes it, in that session, and after ASK to the target. Otherwise
// it is a new session of the write's range. Each write of a batch so
// refused goes again on its own, in the batch's order, after the batch's
// other commands (as a command a member turned away does), its reply in
// its place; the EXEC of a transaction does not (the call fails), since
// its transaction would have to go again whole.
//
// The write goes again after its first refusal, and after each later one
// by a member other than the one that opened the session it refused: the
// session was new, and the refusal is another group's (the write's slots
// moved on meanwhile, or the map the client learned was older), up to
// maxRefusals. A session refused by the member that opened it expired
// there, or was dropped, at once: the call fails.
func (c *Client) callIn(ctx context.Context, req request, refused int, asked *pool) ([]Value, error) {
	if !c.opts.sessions || c.sess.off.Load() {
		return c.exec(ctx, req)
	}
	ws, err := c.sessionWrites(ctx, req, asked)
	if err != nil {
		return nil, err
	}
	if ws == nil { // no writes, or the server has no sessions
		return c.exec(ctx, req)
	}
	done := issue(ws)
	replies, at, resent, err := c.execResent(ctx, wrap(req, ws))
	done()
	if err == nil && resent {
		err = abortedAfterResend(req, replies)
	}
	if err != nil {
		return nil, err
	}
	var inTx []int // txEnds(req), once a refusal needs it
	for _, w := range ws {
		v := replies[w.cmd]
		if !v.IsError() || !bytes.HasPrefix(v.Str, []byte("SESSIONEXPIRED")) {
			continue
		}
		// A refusal after ASK is the slot move's target's, which says
		// nothing of the session in the source, where it stays open for
		// the slots the source serves. Any other is the session's own
		// group's: the next write of its span opens a new one.
		target, by := at.wasAsked(w.cmd), at.of(w.cmd)
		if !target || w.s.sp.at != "" {
			c.sess.expired(w.s)
		}
		if inTx == nil {
			inTx = txEnds(req)
		}
		rerr := &ReplyError{Msg: string(v.Str)}
		again := inTx[w.cmd] < 0 && refused < maxRefusals && (refused == 0 || by != w.s.at)
		switch {
		case resent:
			return nil, fmt.Errorf("%w: client session %d expired before the write was answered (later writes go in a new session): %w",
				ErrUnknownOutcome, w.s.id, rerr)
		case !again:
			return nil, fmt.Errorf("client: client session %d had expired, and the writes it refused were not applied (later writes go in a new session): %w", w.s.id, rerr)
		}
		var in *pool
		if target {
			in = by
		}
		v2, err := c.callIn(ctx, request{cmd: req.command(w.cmd)}, refused+1, in)
		if err != nil {
			return nil, err
		}
		replies[w.cmd] = v2[0]
	}
	return replies, nil
}

// sessionWrites returns the writes of req with the sessions they go in,
// opening those that are not open, or nil if req has no write or the
// server has no sessions. With asked set, req's one write goes in the
// session opened at asked (see callIn).
//
// A transaction that req holds whole, MULTI to EXEC, and that writes is
// one write: its commands go as they are, and its EXEC in FLINT.SEQ, in
// the session of its first key's slot (where routeTx sends it), so that a
// resent transaction is answered with the reply of its one application,
// its reads' included.
func (c *Client) sessionWrites(ctx context.Context, req request, asked *pool) ([]sessionWrite, error) {
	var ws []sessionWrite
	ends := txEnds(req)
	txSlot, txWrites := -1, false // of the transaction under way
	for i := range req.len() {
		cmd := req.command(i)
		_, _, name := splitCommand(cmd)
		slot := slotOfCommand(cmd)
		switch {
		case name == "MULTI":
			txSlot, txWrites = -1, false
			continue
		case ends[i] == i && txWrites: // the EXEC of a transaction that writes
			slot = txSlot
		case ends[i] >= 0: // queued, or the EXEC of one that only reads
			if txSlot < 0 {
				txSlot = slot
			}
			txWrites = txWrites || sessionWrites[name]
			continue
		case !sessionWrites[name]:
			continue
		}
		s, err := c.sessionFor(ctx, slot, asked)
		if err != nil || s == nil {
			return nil, err
		}
		ws = append(ws, sessionWrite{cmd: i, s: s})
	}
	return ws, nil
}

// issue numbers the writes of ws, in order within each session, and
// returns the function that gives the numbers up once their call returns.
func issue(ws []sessionWrite) (done func()) {
	type block struct {
		s     *session
		first uint64
		n     int
	}
	var blocks []block
	for _, w := range ws {
		k := slices.IndexFunc(blocks, func(b block) bool { return b.s == w.s })
		if k < 0 {
			k = len(blocks)
			blocks = append(blocks, block{s: w.s})
		}
		blocks[k].n++
	}
	for k := range blocks {
		b := &blocks[k]
		first, low := b.s.issue(b.n)
		b.first = first
		for i := range ws {
			if ws[i].s == b.s {
				ws[i].seq, ws[i].low = first, low
				first++
			}
		}
	}
	return func() {
		for _, b := range blocks {
			b.s.done(b.first, b.n)
		}
	}
}

// wrap returns req with each write of ws in FLINT.SEQ, with its session's
// id, its number and the session's lowest unacknowledged number.
func wrap(req request, ws []sessionWrite) request {
	var out request
	if req.ends != nil {
		out.ends = make([]int, 0, len(req.ends))
	}
	for i := range req.len() {
		cmd := req.command(i)
		if len(ws) > 0 && ws[0].cmd == i {
			w := ws[0]
			ws = ws[1:]
			n, body, _ := splitCommand(cmd)
			out.cmd = appendArgsN(out.cmd, n+4, "FLINT.SEQ", strconv.FormatUint(w.s.id, 10),
				strconv.FormatUint(w.seq, 10), strconv.FormatUint(w.low, 10))
			out.cmd = append(out.cmd, body...)
		} else {
			out.cmd = append(out.cmd, cmd...)
		}
		if out.ends != nil {
			out.ends = append(out.ends, len(out.cmd))
		}
	}
	return out
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

// sessionFor returns the session of a write routed by slot: the one
// opened at asked, if that is not nil (see askedSession), else that of
// slot's range (see session).
func (c *Client) sessionFor(ctx context.Context, slot int, asked *pool) (*session, error) {
	if asked != nil {
		return c.askedSession(ctx, asked)
	}
	return c.session(ctx, slot)
}

// session returns the open session of the range holding slot (-1 for a
// write without keys), opening one if there is none, or nil if the server
// has no sessions. The error says why no session could be opened; the
// write that needed it was not sent.
//
// A session is opened in the group that serves its range, by sending
// FLINT.SESSION to the range's master, and is used for the writes to that
// range: a group does not know another's sessions. Sessions of different
// ranges open independently, so that a range whose group has no leader
// holds up only its own writes.
func (c *Client) session(ctx context.Context, slot int) (*session, error) {
	sp, route := c.spanOf(slot)
	return c.openIn(ctx, sp, func() ([]Value, *pool, error) {
		v, at, _, err := c.execResent(ctx, request{cmd: openSession, slots: []int{route}})
		return v, at.of(0), err
	})
}

// askedSession returns the open session of the group of p, the member
// that an ASK named, the target of a slot move, for the writes that it
// refused in the session of the range that the map routes them by (see
// callIn), opening one at p if there is none. A MOVED from p, which led
// its group no more, sends FLINT.SESSION to the leader it names.
func (c *Client) askedSession(ctx context.Context, p *pool) (*session, error) {
	return c.openIn(ctx, span{first: -1, last: -1, at: p.addr}, func() ([]Value, *pool, error) {
		to := p
		v, err := to.send(ctx, openSession, 1)
		if err == nil && v[0].IsError() && refusalOf(v[0].Str) == movedTo {
			_, _, addr, _ := parseRedirect(v[0].Str)
			p = c.poolOf(addr)
		}
		return v, to, err
	})
}

// openSession is the encoding of FLINT.SESSION.
var openSession = appendArgs(nil, "FLINT.SESSION")

// openIn returns the open session of sp, opening one if there is none by
// sending FLINT.SESSION with send, which returns the replies and the
// member that gave them, or nil if the server has no sessions.
// The error says why no session could be opened; the write that needed it
// was not sent.
func (c *Client) openIn(ctx context.Context, sp span, send func() ([]Value, *pool, error)) (*session, error) {
	ss := c.sess.slot(sp, c.table.Load())
	if s := ss.cur.Load(); s != nil {
		return s, nil
	}
	select {
	case ss.open <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("client: request not sent: waiting for a session: %w", ctx.Err())
	}
	defer func() { <-ss.open }()
	if s := ss.cur.Load(); s != nil || c.sess.off.Load() {
		return s, nil
	}
	wait := backoff.Default()
	for {
		v, at, err := send()
		switch {
		case err != nil && errors.Is(err, ErrUnknownOutcome):
			// The user's write was not sent, whatever became of FLINT.SESSION.
			return nil, fmt.Errorf("%w: request not sent: opening a session: %v", ErrConnect, err)
		case err != nil:
			return nil, fmt.Errorf("client: request not sent: opening a session: %w", err)
		case v[0].IsError() && (bytes.Contains(v[0].Str, []byte("too many sessions opened")) ||
			bytes.HasPrefix(v[0].Str, []byte("UNKNOWN ")) || refusalOf(v[0].Str) != accepted):
			// Too many opened at once, or a leader lost its leadership
			// while it logged this one (which, if it was opened, goes
			// unused and expires), or a member that sent it on or
			// could not take it: the user's write was not sent, and
			// is sent in the session opened next.
			if werr := wait.Wait(ctx); werr != nil {
				return nil, fmt.Errorf("client: request not sent: opening a session: %w", werr)
			}
			continue
		}
		return c.opened(ss, sp, v[0], at)
	}
}

// spanOf returns the span of the session for a write routed by slot, and
// the slot to route its FLINT.SESSION by.
func (c *Client) spanOf(slot int) (span, int) {
	t := c.table.Load()
	i := t.rangeOf(slot)
	if i < 0 {
		return anySpan, -1
	}
	r := t.ranges[i]
	return span{first: r.first, last: r.last}, r.first
}

// slot returns the session slot of sp, adding it if there is none. Adding
// one drops those of spans that are no longer ranges of t's map, those
// opened at a move's target among them, whose sessions the server lets
// expire.
func (ss *sessions) slot(sp span, t *table) *sessionSlot {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s, ok := ss.mu.bySpan[sp]; ok {
		return s
	}
	for old := range ss.mu.bySpan {
		if old != anySpan && !slices.ContainsFunc(t.ranges, func(r slotRange) bool { return r.first == old.first && r.last == old.last }) {
			delete(ss.mu.bySpan, old)
		}
	}
	s := &sessionSlot{open: make(chan struct{}, 1)}
	ss.mu.bySpan[sp] = s
	return s
}

// expired records that the server refused s as expired: the next write of
// its span opens a new one.
func (ss *sessions) expired(s *session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if slot, ok := ss.mu.bySpan[s.sp]; ok {
		slot.cur.CompareAndSwap(s, nil)
	}
}

// opened handles the reply to FLINT.SESSION for the span sp, whose slot
// is ss, from the member at.
func (c *Client) opened(ss *sessionSlot, sp span, v Value, at *pool) (*session, error) {
	if v.Kind == KindInt && v.Int > 0 {
		s := newSession(uint64(v.Int), sp, at)
		ss.cur.Store(s)
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
