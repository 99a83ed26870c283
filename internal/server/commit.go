package server

import (
	"fmt"
	"runtime"
	"time"

	"github.com/flintkv/flint/internal/bugs"
	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/replica"
	"github.com/flintkv/flint/internal/slot"
	"github.com/flintkv/flint/internal/store"
)

// Write commands do not take effect at once. write adds a command's entry
// to the connection's batch and records how to reply to it; commit hands
// the whole batch to Backend.Apply in one call, so that a pipeline of writes
// waits for one commit rather than one per command. Simple reads pipelined
// after a write (GET, MGET, EXISTS, STRLEN) are deferred, not run, so that
// a pipeline that mixes reads and writes still waits for one commit. Each
// must see the writes before it and none after it, as if run in order, and
// serving them all once the batch is applied would not do: another
// client's write applied after a later write of the batch could be seen.
// So their keys are looked up at their place in the batch, by Apply's
// done callback, right after the write before them takes effect.
//
// done runs on the backend's apply thread, which applies the writes of
// every connection, so it only records (writeApplied): each write's
// store.Result, and for each deferred read what its keys hold (see
// lookup). Both are references to the store's values, whose bytes are never
// modified (see store.Result), so recording copies no value, and makes no
// reply. Once Apply returns, the connection's goroutine replies to the
// writes and the deferred reads in order from what done recorded
// (replyBatch), like any reply: into c.out, sent with the output's limits
// and the client's backpressure. A write that Apply did not report on
// gets Apply's error, and the reads after it run then, where the batch
// failed.
//
// Replies must leave in the order the commands came, hence the invariant:
//
//	Every reply in c.out, or already sent, answers a command that came
//	before the first write in c.batch; the writes in c.batch (EXECs
//	among them), the deferred reads and the held MULTIs and queued
//	commands (c.held) are all the commands executed since.
//
// So nothing may be appended to c.out while the batch holds writes, except
// by commit: exec commits before it runs or rejects any other command, and
// err commits before a write command rejects its arguments. MULTI and EXEC
// join the batch instead (see tx.go): EXEC's entry is added to it like a
// write's, and the replies to a MULTI that comes while the batch holds
// writes, and to the commands queued after it, are held and made by
// replyBatch at their place. Sending c.out meanwhile (maybeFlush) sends
// replies that come before the batch's, which is harmless. execBuffered
// commits at the end of each pass, before its replies are sent and before
// the input the deferred reads point into is dropped; add commits a batch
// that reaches maxBatchEntries or would pass maxBatchBytes.

// heldTx is a MULTI that came after the write numbered after-1 of the
// batch, and queued commands after it: replyBatch replies OK to it, and
// QUEUED to each, after that write's reply and the reads deferred after it.
type heldTx struct{ after, queued int }

// deferredRead is a read pipelined after the write numbered after-1 of the
// batch; its arguments are c.dargs[lo:hi].
type deferredRead struct {
	cmd           *command
	after, lo, hi int
	moved         bool // its slot was not served here when it was looked up (see movingLookup)
}

// A lookup is what a simple read found under one of its keys. val is
// shared with the store, which never modifies it.
type lookup struct {
	val   []byte
	found bool
}

// Limits of one batch of writes.
const (
	maxBatchEntries = 1024
	maxBatchBytes   = 4 << 20 // encoded
)

// maxDeferredKeys bounds the keys that a batch's deferred reads read. With
// maxBatchEntries it bounds what Apply's callback records, however long the
// pipeline: a result for each write and a lookup for each key, each of
// which keeps at most one value alive until its reply is made.
const maxDeferredKeys = 1024

// maxPrefetchedValue is the longest value that prefetchAhead and
// touchValues load ahead of its reply: they load a value's first and last
// lines, a small part of copying a longer one.
const maxPrefetchedValue = 512

// A reply appends the reply to a committed write command, given its
// result, which has no Err. Replies are top-level functions, so recording
// one allocates nothing; EXEC's alone is a closure (see execCmd).
type reply func(c *conn, res store.Result)

func replyOK(c *conn, _ store.Result)      { c.ok() }
func replyValue(c *conn, res store.Result) { c.value(res.Val, res.Found) }
func replyBool(c *conn, res store.Result)  { c.bool(res.Done) }
func replyInt(c *conn, res store.Result)   { c.int(res.Int) }

// replySet replies to SET without GET: OK, or null when NX or XX stopped it.
func replySet(c *conn, res store.Result) {
	if res.Done {
		c.ok()
	} else {
		c.null()
	}
}

// write adds a write command to the batch; reply replies to it once the
// batch is committed. A command that would take the batch past
// maxBatchBytes commits the batch first, so that a batch passes that limit
// only when it holds one command, and a command too long for the backend is
// refused alone, not with the writes pipelined before it.
func (c *conn) write(op store.Op, flags byte, reply reply, args ...[]byte) {
	if c.tx.build != nil {
		c.txWrite(op, flags, reply, args)
		return
	}
	s := int32(-1)
	if c.srv.cluster != nil && len(args) > 0 {
		s = int32(slot.Of(args[0]))
	}
	c.add(op, flags, reply, s, args)
}

// add adds an entry to the batch, after its OpSeq for FLINT.SEQ; reply
// replies to it once the batch is committed, and a refusal of it is
// redirected by slot s, its key's (-1 for none: see refusedReply).
func (c *conn) add(op store.Op, flags byte, reply reply, s int32, args [][]byte) {
	if c.batch.Len() > 0 && len(c.batch.Bytes())+store.AddSize(args...)+seqSize(c.seq) > maxBatchBytes {
		c.commit()
	}
	if c.seq != nil { // FLINT.SEQ: its OpSeq goes right before the write
		c.batch.Add(store.OpSeq, 0, c.seq...)
		c.replies = append(c.replies, nil)
		c.entryCmds = append(c.entryCmds, nil)
		c.noteSlot(-1)
		c.seq = nil
	}
	c.batch.Add(op, flags, args...)
	c.replies = append(c.replies, reply)
	c.entryCmds = append(c.entryCmds, c.running)
	c.noteSlot(s)
	if c.batch.Len() >= maxBatchEntries || len(c.batch.Bytes()) >= maxBatchBytes {
		c.commit()
	}
}

// deferRead queues a simple read that came after pending writes. A read
// that would take the batch past maxDeferredKeys commits the batch first,
// then runs.
func (c *conn) deferRead(cmd *command, args [][]byte) {
	if c.deferredKeys+len(args)-1 > maxDeferredKeys {
		c.commit()
		cmd.run(c, args)
		return
	}
	c.deferredKeys += len(args) - 1
	lo := len(c.dargs)
	c.dargs = append(c.dargs, args...)
	c.deferred = append(c.deferred, deferredRead{cmd: cmd, after: c.batch.Len(), lo: lo, hi: len(c.dargs)})
}

// commit applies the batch of writes, if there is one, and appends the
// replies to its writes, deferred reads and held transactions. While EXEC
// builds its entry it does nothing: what the queued commands reply then is
// the transaction's (see buildTx), and the batch's writes, which came
// before the EXEC, are not yet to be answered.
func (c *conn) commit() {
	n := c.batch.Len()
	if n == 0 || c.tx.build != nil {
		return
	}
	c.nextRead = 0
	start := time.Now()
	err := c.srv.kv.Apply(c.srv.ctx, c.batch.Bytes(), c.applied)
	if err == nil && len(c.results) < n {
		err = fmt.Errorf("%w: the backend reported %d of the batch's %d writes applied, and no error", replica.ErrOutcomeUnknown, len(c.results), n)
	}
	c.committed()
	d := time.Since(start).Nanoseconds()
	c.commitNanos += d
	if !c.timing {
		c.excluded += d
	}
	// Empty the batch before replying: a failed write's reply calls err,
	// which commits too.
	c.resetBatch(len(c.batch.Bytes()))
	c.replyBatch(n, err)
	clear(c.results) // let the values go
	clear(c.entryCmds)
	clear(c.replies) // and EXECs' transactions
	c.results, c.replies, c.slots, c.entryCmds = c.results[:0], c.replies[:0], c.slots[:0], c.entryCmds[:0]
	c.held, c.tx.held = c.held[:0], false
	c.dropLookups(0)
	clear(c.dargs) // let the input go
	c.dargs, c.deferred, c.deferredKeys = c.dargs[:0], c.deferred[:0], 0
}

// writeApplied is Apply's done callback: write i has taken effect. It
// records the write's result and looks up the keys of the reads that came
// before the next write. It runs on the backend's apply thread while the
// connection's goroutine waits in Apply, and touches only c.results, c.got,
// c.nextRead and c.prefetch: no reply, no output (see the top of this file).
func (c *conn) writeApplied(i int, res store.Result) {
	c.results = append(c.results, res) // at i: done is called in order
	c.lookDeferred(i + 1)
}

// lookDeferred looks up the keys of the deferred reads that came after
// write after-1, in order.
func (c *conn) lookDeferred(after int) {
	s := c.srv.kv.Store()
	ahead := c.nextRead // the reads before it have been prefetched or looked up
	for ; c.nextRead < len(c.deferred) && c.deferred[c.nextRead].after == after; c.nextRead++ {
		if c.nextRead == ahead {
			ahead = c.prefetchReads(ahead, after)
		}
		d := c.deferred[c.nextRead]
		c.look(s, d.cmd, c.dargs[d.lo+1:d.hi]) // a simple read's arguments are keys
		c.deferred[c.nextRead].moved = c.movingLookup(s, c.dargs[d.lo+1:d.hi])
	}
}

// prefetchReads prefetches (see store.Prefetch) the keys of the deferred
// reads that came after write after-1, from the from-th on, about
// store.PrefetchKeys of them, and returns the number of the first read it
// did not reach. Those reads are looked up next, one after another. It
// loads no values: looking up takes only references to them.
func (c *conn) prefetchReads(from, after int) int {
	keys, i := c.prefetch[:0], from
	for ; i < len(c.deferred) && c.deferred[i].after == after && len(keys) < store.PrefetchKeys; i++ {
		d := c.deferred[i]
		ks := c.dargs[d.lo+1 : d.hi]
		keys = append(keys, ks[:min(len(ks), store.PrefetchKeys-len(keys))]...)
	}
	c.srv.kv.Store().Prefetch(keys, 0, 0)
	clear(keys) // let the input go
	c.prefetch = keys[:0]
	return i
}

// replyBatch replies, in order, to the n writes of the batch that Apply
// just returned from, with err, to the reads deferred among them, from
// what writeApplied recorded, and to the transactions held among them. The
// writes it did not report on get err, and the reads after them run now,
// where the batch stopped.
func (c *conn) replyBatch(n int, err error) {
	got, r, ahead, h := c.got, 0, 0, 0 // the first ahead of got are touched
	defer func(running *command) { c.running = running }(c.running)
	for i := range n {
		c.running = c.entryCmds[i] // for failed_calls
		reported := i < len(c.results)
		switch {
		case c.replies[i] == nil: // an OpSeq: its write replies for it
		case !reported:
			c.err(c.refusedReply(err, i, errorReply(err)))
		case c.results[i].Err != nil:
			c.writeErr(c.results[i].Err)
		default:
			c.replies[i](c, c.results[i])
		}
		for ; r < len(c.deferred) && c.deferred[r].after == i+1; r++ {
			d := c.deferred[r]
			c.running = d.cmd
			if !reported {
				c.runDeferred(d)
				continue
			}
			k := d.hi - d.lo - 1
			if ahead < k {
				ahead = touchValues(got, k)
			}
			if d.moved {
				c.err(tryAgain)
			} else {
				d.cmd.reply(c, got[:k])
			}
			got, ahead = got[k:], ahead-k
		}
		for ; h < len(c.held) && c.held[h].after == i+1; h++ {
			c.replyHeld(c.held[h].queued)
		}
	}
}

// runDeferred runs a deferred read now, with its own slot as the
// connection's keySlot meanwhile (see movedAway).
func (c *conn) runDeferred(d deferredRead) {
	saved := c.keySlot
	if c.srv.sharded != nil {
		c.keySlot = slot.Of(c.dargs[d.lo+1])
	}
	d.cmd.run(c, c.dargs[d.lo:d.hi])
	c.keySlot = saved
}

// touchValues loads into the cache the values of the first k of got, or
// of the first store.PrefetchKeys if there are more: the lines of their
// first and last bytes, of those at most maxPrefetchedValue long, as
// store.Prefetch does, so that their misses overlap rather than come one
// at a time as the replies copy them. It returns how many it looked at.
func touchValues(got []lookup, k int) int {
	k = max(k, min(len(got), store.PrefetchKeys))
	var sum byte
	for _, l := range got[:k] {
		if n := len(l.val); n > 0 && n <= maxPrefetchedValue {
			sum += l.val[0] + l.val[n-1]
		}
	}
	runtime.KeepAlive(sum)
	return k
}

// look appends to c.got what keys hold in s, read at one instant. It only
// reads the store: on the apply thread it is all that a deferred read
// does there.
func (c *conn) look(s *store.Store, cmd *command, keys [][]byte) {
	switch {
	case bugs.On(bugs.StaleRead) && cmd.name == "get":
		c.staleLook(keys[0])
	case len(keys) == 1:
		v, found := s.Get(keys[0])
		c.got = append(c.got, lookup{v, found})
	default:
		s.MGet(keys, c.record)
	}
}

// lookedUp records one key's lookup, for store.MGet; c.record is it, made
// once, so that passing it allocates nothing.
func (c *conn) lookedUp(_ int, val []byte, found bool) {
	c.got = append(c.got, lookup{val, found})
}

// readNow runs a simple read at once: it looks its keys up and replies. A
// read of one key, the common case, keeps its lookup in c.one rather than
// c.got, which makes a GET of a small store about 10% cheaper
// (BenchmarkPipelineReads/1K/now).
func (c *conn) readNow(cmd *command, args [][]byte) {
	s, ok := c.read()
	if !ok {
		return
	}
	if len(args) == 2 && !bugs.On(bugs.StaleRead) {
		v, found := s.Get(args[1])
		if c.movedAway() { // checked after the read: see slotmove.go
			return
		}
		c.one[0] = lookup{v, found}
		cmd.reply(c, c.one[:])
		c.one[0] = lookup{} // let the value go
		return
	}
	from := len(c.got)
	c.look(s, cmd, args[1:])
	if !c.movedAway() {
		cmd.reply(c, c.got[from:])
	}
	c.dropLookups(from)
}

// dropLookups forgets the lookups from the from-th on, letting their values
// go, and gives back an array that a long MGET made grow past what a
// batch's deferred reads use (maxDeferredKeys, and append's slack).
func (c *conn) dropLookups(from int) {
	clear(c.got[from:])
	c.got = c.got[:from]
	if from == 0 && cap(c.got) > 2*maxDeferredKeys {
		c.got = nil
	}
}

// aheadCommands bounds how many commands prefetchAhead looks at, and
// aheadLimits how many arguments each may have, and how long an inline
// command may be: one with more arguments than a prefetch could use is an
// error of its parser, which ends the look. The parser skips over a bulk
// argument without reading it, so a look costs little however large the
// commands are, or however slowly they arrive. Keys longer than aheadKey
// are not worth hashing twice.
const (
	aheadCommands = 4 * store.PrefetchKeys
	aheadKey      = 1 << 10
)

// aheadLimits returns the limits of prefetchAhead's parser on a server
// whose own are lim: no looser than lim, so that the look never reaches past
// a command the connection's parser refuses.
func aheadLimits(lim protocol.Limits) protocol.Limits {
	lim.MaxArgs = min(lim.MaxArgs, 1+store.PrefetchKeys)
	lim.MaxInline = min(lim.MaxInline, 1<<10)
	return lim
}

// prefetchAhead prefetches (see store.Prefetch) the keys of the GETs and
// MGETs at the start of in, up to store.PrefetchKeys of them, and returns
// the length of the commands it parsed, or of in if it reached a command
// not yet complete: those commands are not to be looked at again. The
// reads run next, one after another, on this goroutine; it stops after the
// first write, after which reads are deferred (and prefetched by
// prefetchReads), and at the first command that aheadLimits refuse or
// that is malformed, which execBuffered then deals with.
func (c *conn) prefetchAhead(in []byte) int {
	keys, off := c.prefetch[:0], 0
	c.lookahead.Reset()
	for i := 0; i < aheadCommands && len(keys) < store.PrefetchKeys; i++ {
		args, n, err := c.lookahead.Next(in[off:], c.aheadArgs[:0])
		c.aheadArgs = args
		if err != nil {
			if err == protocol.ErrIncomplete {
				off = len(in) // the rest is one command, not yet complete
			}
			break
		}
		off += n
		if len(args) == 0 || len(args[0]) > len(c.lower) { // no command's name is that long
			continue
		}
		cmd := commands[string(c.lowerName(args[0]))]
		if cmd != nil && cmd.write {
			break
		}
		if cmd == nil || !cmd.readsValues {
			continue
		}
		for _, k := range args[1:] {
			if len(k) <= aheadKey && len(keys) < store.PrefetchKeys {
				keys = append(keys, k)
			}
		}
	}
	c.srv.kv.Store().Prefetch(keys, len(keys), maxPrefetchedValue)
	clear(keys) // let the input go
	clear(c.aheadArgs[:cap(c.aheadArgs)])
	c.prefetch = keys[:0]
	return off
}

// resetBatch empties the batch, given how many bytes it held. Like reuseOut
// it keeps memory that batches use a good part of, and gives back what a
// large value made it grow to.
func (c *conn) resetBatch(used int) {
	if n := cap(c.batch.Bytes()); n > 2*maxBatchBytes || (n > keepIdle && used < n/8) {
		c.batch = store.Batch{}
		return
	}
	c.batch.Reset()
}

// writeErr replies with the Redis form of a store or backend error.
func (c *conn) writeErr(err error) { c.err(errorReply(err)) }

// read returns the store to serve a read from, once the read barrier has
// run; it replies and returns false if the read cannot be served.
//
// A read must reflect every write acknowledged before it arrived. The
// barrier runs at the first read after input arrives, and not again until
// more does (received clears barrierOK, including input read in the middle
// of a pass while replies drain). So every read it serves arrived before
// the barrier began, and a write acknowledged before the read arrived was
// acknowledged before the barrier, which makes Store reflect it. The
// connection's own writes are committed before any later command runs, and
// Apply returns once they are applied, so reads see them too. Store only
// moves forward, so a read served later sees at least that state: one that
// was current at some moment between the read's arrival and its reply.
// Deferred reads skip the barrier: their keys are looked up where the
// connection's writes before them took effect, after the barrier's point
// in time.
func (c *conn) read() (*store.Store, bool) {
	if !c.barrierOK {
		if err := c.srv.kv.ReadBarrier(c.srv.ctx); err != nil {
			c.writeErr(err)
			return nil, false
		}
		c.barrierOK = true
	}
	if c.movedAway() {
		return nil, false
	}
	return c.srv.kv.Store(), true
}
