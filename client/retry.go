package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/flintkv/flint/internal/backoff"
	"github.com/flintkv/flint/internal/protocol"
)

// request is the commands of one call, encoded back to back.
type request struct {
	cmd  []byte
	ends []int // ends[i] is where command i ends in cmd; nil for a single command
	// slots[i] is the slot command i is routed by, or -1 to send it to the
	// target (it has no key). nil: every command goes to the target, as in
	// a map that is not sharded.
	slots []int
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

// slot returns the slot command i is routed by, or -1.
func (r request) slot(i int) int {
	if r.slots == nil {
		return -1
	}
	return r.slots[i]
}

// send runs req's commands, as routed by req.slots, and returns their
// replies, error replies included, following MOVED and ASK and retrying
// refusals and failures as the package doc says (Failover). It also
// reports whether a write of req was sent more than once after an attempt
// that may have taken effect: if not, a write's reply is the outcome of
// its only send that may have applied. at tells which member gave each
// reply.
//
// The first attempt sends each command to the owner of its slot; commands
// for one member go together, in order, in one request on one connection,
// and the requests to different members go concurrently. Only a refusal
// or a failure costs more.
func (c *Client) send(ctx context.Context, req request) (replies []Value, at origin, resent bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, origin{}, false, fmt.Errorf("client: request not sent: %w", err)
	}
	p, one := c.owner(req.slot(0)), true
	for i := 1; i < req.len() && one && req.slots != nil; i++ {
		one = c.owner(req.slots[i]) == p
	}
	var rt *retrier
	var legs []leg
	if one {
		replies, err := p.send(ctx, req.cmd, req.len())
		if err == nil && settled(req, replies) {
			return replies, origin{all: p}, false, nil
		}
		rt = newRetrier(c, req, func(int) *pool { return p })
		legs = []leg{{p: p, parts: rt.pending, replies: replies, err: err}}
	} else {
		rt = newRetrier(c, req, func(i int) *pool { return c.owner(req.slot(i)) })
		legs = rt.legs()
		c.sendLegs(ctx, req, legs)
	}
	replies, err = rt.run(ctx, legs)
	return replies, rt.origin(), rt.maybe != nil, err
}

// origin tells which member gave each reply of a request.
type origin struct {
	all   *pool   // every reply's, if each is nil
	each  []*pool // the reply of command i's
	asked []bool  // whether command i went to each[i] after an ASK; nil if none did
}

func (o origin) of(i int) *pool {
	if o.each == nil {
		return o.all
	}
	return o.each[i]
}

// wasAsked reports whether command i's reply came from the member an ASK
// named: the target of a slot move, which the map does not name for the
// command's slot.
func (o origin) wasAsked(i int) bool { return o.asked != nil && o.asked[i] }

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
// resend take effect once; else accepted, a final reply. An UNKNOWN EXEC
// is final, in a session or not: sent alone, without its MULTI, it would
// not run.
func classify(v Value, cmd []byte) refusal {
	if !v.IsError() {
		return accepted
	}
	if r := refusalOf(v.Str); r != accepted {
		return r
	}
	if strings.HasPrefix(string(v.Str), "UNKNOWN ") && commandName(cmd) == "FLINT.SEQ" && txName(cmd) != "EXEC" {
		return busy
	}
	return accepted
}

// retrier carries one call through its attempts after the first. Each
// command of the call goes its own way (a hop), and an attempt sends
// every command still pending, grouped by member (legs).
type retrier struct {
	c       *Client
	req     request
	replies []Value // each command's final reply, once it has come
	final   []bool  // whether replies[i] has come
	pending []int   // the commands with no final reply yet, in order
	hops    []hop   // each command's way
	ends    []int   // txEnds(req)
	txs     []txSpan
	last    error // the last failure or refusal, for when the call gives up
	// maybe is why an earlier attempt of a write may have taken effect (a
	// session's write resent after its outcome was unknown), or nil: a
	// call that gives up after one must not say its writes were not sent.
	maybe error
	wait  backoff.Backoff
}

// hop is where one command of a call goes next, and why.
type hop struct {
	to   *pool // the member it goes to next: where its last attempt went, until it is rerouted
	via  via   // why to was chosen
	seen *pool // the owner of the command's slot when the call last looked
	wait bool  // it waits out a backoff before its next attempt
	pick bool  // after the backoff, it picks its member afresh (see reroute)
}

// via is why a command goes to a member.
type via uint8

const (
	viaOwner   via = iota // the member the map names for its slot
	viaMoved              // a MOVED named it
	viaAsked              // an ASK named it: the command goes after ASKING, and the map is unchanged
	viaRotated            // the member after the one before, which failed or had no leader
)

// newRetrier returns the retrier of a call of req whose first attempt
// sent command i to to(i).
func newRetrier(c *Client, req request, to func(i int) *pool) *retrier {
	n := req.len()
	rt := &retrier{c: c, req: req, wait: backoff.Default()}
	rt.replies, rt.final = make([]Value, n), make([]bool, n)
	rt.ends = txEnds(req)
	rt.txs = txSpans(rt.ends)
	rt.pending, rt.hops = make([]int, n), make([]hop, n)
	for i := range n {
		p := to(i)
		rt.pending[i], rt.hops[i] = i, hop{to: p, seen: p}
	}
	return rt
}

// origin returns the member that answered each command, and whether an
// ASK named it.
func (rt *retrier) origin() origin {
	o := origin{each: make([]*pool, len(rt.hops))}
	for i, h := range rt.hops {
		o.each[i] = h.to
		if h.via == viaAsked {
			if o.asked == nil {
				o.asked = make([]bool, len(rt.hops))
			}
			o.asked[i] = true
		}
	}
	return o
}

// run makes attempts until every command has its final reply or the call
// has to stop. legs are the outcomes of the last attempt.
func (rt *retrier) run(ctx context.Context, legs []leg) ([]Value, error) {
	for {
		for i := range legs {
			if err := rt.file(ctx, &legs[i]); err != nil {
				return nil, rt.giveUp(err)
			}
		}
		rt.keepTxsWhole()
		rt.pending = rt.stillPending()
		if len(rt.pending) == 0 {
			return rt.replies, nil
		}
		if rt.waiting() {
			if err := rt.wait.Wait(ctx); err != nil {
				return nil, rt.giveUp(fmt.Errorf("client: gave up retrying: %w", err))
			}
			rt.reroute()
		}
		legs = rt.legs()
		rt.c.sendLegs(ctx, rt.req, legs)
	}
}

// file takes the outcome of one leg: final replies in their commands'
// places, refused commands kept pending with their next hop. It returns
// the leg's error if its commands may not be sent again. A member turned
// to after another failed that runs a command becomes the owner of the
// command's slot.
func (rt *retrier) file(ctx context.Context, lg *leg) error {
	if lg.err != nil {
		return rt.failed(ctx, lg)
	}
	promoted := -2 // the range last promoted to lg.p, to do it once per range
	for k, i := range lg.parts {
		v, h := lg.replies[k], &rt.hops[i]
		switch classify(v, rt.req.command(i)) {
		case accepted:
			rt.replies[i], rt.final[i] = v, true
			if r := rt.c.table.Load().rangeOf(rt.req.slot(i)); h.via == viaRotated && r != promoted {
				rt.c.promote(lg.p, rt.req.slot(i))
				promoted = r
			}
			continue
		case movedTo:
			rt.redirected(h, rt.movedTo(i, v.Str), viaMoved)
		case askedTo:
			_, _, addr, _ := parseRedirect(v.Str)
			rt.redirected(h, rt.c.poolOf(addr), viaAsked)
		default:
			if refusalOf(v.Str) == accepted { // UNKNOWN, to a session's write
				rt.maybe = &ReplyError{Msg: string(v.Str)}
			}
			h.wait, h.pick = true, true
		}
		rt.last = &ReplyError{Msg: string(v.Str)}
	}
	return nil
}

// keepTxsWhole makes each transaction that the request holds whole,
// MULTI to EXEC, go again as a whole once any of its commands is to go
// again: every one of its commands takes the way of the first that has no
// final reply. A queued command that a member turned away (MOVED, ASK,
// TRYAGAIN, ...) was not queued, and made EXEC discard the transaction;
// sent on alone it would apply outside the transaction, and outside the
// session that its EXEC is in, so that a transaction an earlier attempt
// applied would apply again. Invariant, after each attempt: a
// transaction's commands are all final, or all pending.
func (rt *retrier) keepTxsWhole() {
	for _, tx := range rt.txs {
		k := slices.Index(rt.final[tx.multi:tx.exec+1], false)
		if k < 0 {
			continue
		}
		h := rt.hops[tx.multi+k]
		for i := tx.multi; i <= tx.exec; i++ {
			rt.final[i], rt.hops[i] = false, h
		}
	}
}

// inTx reports whether command i is queued in, or the EXEC of, a
// transaction that the request holds whole. Sent after an ASK, such a
// command goes without an ASKING of its own: the one before the MULTI
// holds for the whole transaction, and one inside it would be queued.
func (rt *retrier) inTx(i int) bool {
	return slices.ContainsFunc(rt.txs, func(tx txSpan) bool { return tx.multi < i && i <= tx.exec })
}

// txSpan is a transaction that a request holds whole: the indexes of its
// MULTI and of its EXEC (in FLINT.SEQ or not).
type txSpan struct{ multi, exec int }

// txSpans returns the transactions that a request holds whole, in order,
// given its txEnds.
func txSpans(ends []int) []txSpan {
	var txs []txSpan
	for i := 0; i < len(ends); i++ {
		if ends[i] >= 0 { // the first command after a MULTI
			txs = append(txs, txSpan{multi: i - 1, exec: ends[i]})
			i = ends[i]
		}
	}
	return txs
}

// failed takes a leg whose request failed with lg.err.
func (rt *retrier) failed(ctx context.Context, lg *leg) error {
	if !rt.resendable(ctx, lg.err, lg.parts) {
		return lg.err
	}
	rt.last = lg.err
	if errors.Is(lg.err, ErrUnknownOutcome) && !rt.readOnly(lg.parts) {
		rt.maybe = lg.err
	}
	for _, i := range lg.parts {
		rt.hops[i].wait, rt.hops[i].pick = true, true
	}
	if rt.c.table.Load().sharded() { // a node failed: the map may have changed
		rt.c.refresh()
	}
	return nil
}

// movedTo records the MOVED reply msg to command i and returns the pool it
// names. The map learns that the member serves the slot the command is
// routed by, which for a command routed by its group (RANGE) is not the
// slot of its first argument that the reply names. A MOVED that the map
// knows already (another command of the call had it) changes nothing.
func (rt *retrier) movedTo(i int, msg []byte) *pool {
	_, slot, addr, _ := parseRedirect(msg)
	if s := rt.req.slot(i); s >= 0 {
		slot = s
	}
	if p := rt.c.owner(slot); p.addr == addr {
		return p
	}
	return rt.c.moved(slot, addr)
}

// redirected sends a command a MOVED or an ASK named p for: at once, unless
// its last attempt went there for the same reason (two members naming each
// other, as can happen while a leader or a slot changes hands), in which
// case after a backoff.
func (rt *retrier) redirected(h *hop, p *pool, why via) {
	h.wait, h.pick = h.via == why, false
	h.to, h.via = p, why
	if why == viaMoved {
		h.seen = p
	}
}

// stillPending returns the pending commands that have no final reply, in
// order. It filters in place: the kept never pass the reading.
func (rt *retrier) stillPending() []int {
	kept := rt.pending[:0]
	for _, i := range rt.pending {
		if !rt.final[i] {
			kept = append(kept, i)
		}
	}
	return kept
}

// waiting reports whether a pending command waits out a backoff; then all
// do, so that an attempt stays one request per member.
func (rt *retrier) waiting() bool {
	for _, i := range rt.pending {
		if rt.hops[i].wait {
			return true
		}
	}
	return false
}

// reroute picks, after a backoff, the member of each pending command that
// was refused or failed: the owner of its slot if that changed since the
// call last looked (another call learned where the leader is, or the map
// was refreshed), or else the member after the one it went to.
func (rt *retrier) reroute() {
	for _, i := range rt.pending {
		h := &rt.hops[i]
		h.wait = false
		if !h.pick {
			continue
		}
		h.pick = false
		s := rt.req.slot(i)
		if o := rt.c.owner(s); o != h.seen {
			h.to, h.seen, h.via = o, o, viaOwner
			continue
		}
		h.to, h.via = rt.c.after(h.to, s), viaRotated
	}
}

// resendable reports whether the commands may be sent again after an
// attempt failed with err: the context has not ended, the Client is open,
// no server refused the connection for good, and the commands were not
// sent or are all reads or session commands. A write outside a session
// whose outcome is unknown is never sent again: it may have taken effect.
func (rt *retrier) resendable(ctx context.Context, err error, cmds []int) bool {
	switch {
	case ctx.Err() != nil, errors.Is(err, ErrClosed), refusedHandshake(err):
		return false
	case errors.Is(err, ErrUnknownOutcome):
		return rt.reads(cmds)
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

// txCommands may be sent again too: they change nothing themselves. A
// transaction sent again on a new connection is queued anew; one whose
// EXEC goes in FLINT.SEQ is one write of its session, which the server
// applies once, so its queued commands may be sent again too. Otherwise a
// write queued outside a session stops the resend.
var txCommands = map[string]bool{"MULTI": true, "EXEC": true, "DISCARD": true, "WATCH": true, "UNWATCH": true}

// reads reports whether every one of cmds is a read, a session command, a
// transaction command, or queued in a transaction that is one session
// write, so that it may be sent again whatever its outcome.
func (rt *retrier) reads(cmds []int) bool {
	for _, i := range cmds {
		name := commandName(rt.req.command(i))
		if readOnly[name] || sessionCommands[name] || txCommands[name] {
			continue
		}
		if e := rt.ends[i]; e < 0 || commandName(rt.req.command(e)) != "FLINT.SEQ" {
			return false
		}
	}
	return true
}

// txEnds returns, for each command of req, the index of the EXEC that
// ends the transaction it is queued in, if req holds that transaction
// whole, MULTI to EXEC; else -1. An EXEC's own is its index; a MULTI's,
// and those of a transaction that DISCARD ends, -1.
func txEnds(req request) []int {
	ends := make([]int, req.len())
	multi := -1 // the open MULTI
	for i := range ends {
		ends[i] = -1
		switch txName(req.command(i)) {
		case "MULTI":
			multi = i
		case "DISCARD":
			multi = -1
		case "EXEC":
			for j := multi + 1; multi >= 0 && j <= i; j++ {
				ends[j] = i
			}
			multi = -1
		}
	}
	return ends
}

// txName is commandName, but "EXEC" for EXEC in FLINT.SEQ.
func txName(cmd []byte) string {
	args, _, err := protocol.NewParser(protocol.DefaultLimits).Next(cmd, nil)
	if err == nil && len(args) == 5 && strings.EqualFold(string(args[0]), "FLINT.SEQ") && strings.EqualFold(string(args[4]), "EXEC") {
		return "EXEC"
	}
	return commandName(cmd)
}

// readOnly reports whether every one of cmds is a read: one whose outcome
// does not matter.
func (rt *retrier) readOnly(cmds []int) bool {
	for _, i := range cmds {
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

// leg is the commands of an attempt that go to one member, in one request
// on one connection, and what came of it.
type leg struct {
	p       *pool
	parts   []int   // the commands, in order
	asked   []bool  // whether each goes after ASKING; nil if none does
	replies []Value // one per command, ASKING's left out; nil if err
	err     error
}

// legs groups the pending commands by the member each goes to, in order,
// the members in the order their first commands come.
func (rt *retrier) legs() []leg {
	var legs []leg
	for _, i := range rt.pending {
		h := rt.hops[i]
		k := 0
		for k < len(legs) && legs[k].p != h.to {
			k++
		}
		if k == len(legs) {
			legs = append(legs, leg{p: h.to})
		}
		lg := &legs[k]
		if h.via == viaAsked && lg.asked == nil {
			lg.asked = make([]bool, len(lg.parts), len(rt.pending))
		}
		lg.parts = append(lg.parts, i)
		if lg.asked != nil {
			lg.asked = append(lg.asked, h.via == viaAsked && !rt.inTx(i))
		}
	}
	if len(legs) == 1 {
		legs[0].parts = rt.pending // no need for a copy
	}
	return legs
}

// asking is the encoding of ASKING, which makes the member that an ASK
// named run the next command on the connection for a slot it is importing.
var asking = appendArgs(nil, "ASKING")

// sendLegs sends each leg's commands of req to its member, all legs at
// once, and waits for them all.
func (c *Client) sendLegs(ctx context.Context, req request, legs []leg) {
	if len(legs) == 1 {
		legs[0].run(ctx, req)
		return
	}
	var wg sync.WaitGroup
	for k := range legs[1:] {
		wg.Go(func() { legs[k+1].run(ctx, req) })
	}
	legs[0].run(ctx, req)
	wg.Wait()
}

// run sends the leg's commands of req, each after ASKING if it was asked
// for, and keeps the replies to the commands.
func (lg *leg) run(ctx context.Context, req request) {
	if len(lg.parts) == req.len() && lg.asked == nil {
		lg.replies, lg.err = lg.p.send(ctx, req.cmd, req.len())
		return
	}
	var b []byte
	n := len(lg.parts)
	for k, i := range lg.parts {
		if lg.asked != nil && lg.asked[k] {
			b = append(b, asking...)
			n++
		}
		b = append(b, req.command(i)...)
	}
	replies, err := lg.p.send(ctx, b, n)
	if err != nil || lg.asked == nil {
		lg.replies, lg.err = replies, err
		return
	}
	lg.replies = make([]Value, 0, len(lg.parts))
	for k := range lg.parts {
		if lg.asked[k] {
			replies = replies[1:] // ASKING's: the command's own tells what became of it
		}
		lg.replies = append(lg.replies, replies[0])
		replies = replies[1:]
	}
}
