package server

import (
	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/store"
)

// Write commands do not take effect at once. write adds a command's entry
// to the connection's batch and records how to reply to it; commit hands
// the whole batch to Backend.Apply in one call, so that a pipeline of writes
// waits for one commit rather than one per command. Simple reads pipelined
// after a write (GET, MGET, EXISTS, STRLEN) are deferred, not run: Apply's
// done callback replies to write i right after it takes effect, then runs
// the reads that came between write i and write i+1, so that each sees the
// writes before it and none after it, as if run in order. A pipeline that
// mixes reads and writes thus still waits for one commit. Replies must
// leave in the order the commands came, hence the invariant:
//
//	Every reply in c.out, or already sent, answers a command that came
//	before the first write in c.batch; the writes in c.batch and the
//	deferred reads are all the commands executed since.
//
// So nothing may be appended to c.out while the batch holds writes, except
// by commit and its callback: exec commits before it runs or rejects any
// other command, and err commits before a write command rejects its
// arguments. Sending c.out meanwhile (maybeFlush) sends replies that come
// before the batch's, which is harmless; while Apply runs, nothing is sent.
// execBuffered commits at the end of each pass, before its replies are sent
// and before the input the deferred reads point into is dropped; write
// commits a batch that reaches maxBatchEntries or would pass maxBatchBytes.

// deferredRead is a read pipelined after the write numbered after-1 of the
// batch; its arguments are c.dargs[lo:hi].
type deferredRead struct {
	cmd           *command
	after, lo, hi int
}

// Limits of one batch of writes.
const (
	maxBatchEntries = 1024
	maxBatchBytes   = 4 << 20 // encoded
)

// Limits of what Apply's callback adds to c.out, which cannot be sent while
// Apply runs: it reads at most maxDeferredKeys keys for deferred reads, and
// copies no value longer than maxCopiedInApply (see writeLarge). So a batch
// adds at most about (maxBatchEntries+maxDeferredKeys)*maxCopiedInApply
// bytes of replies, however long the pipeline and its values.
const (
	maxDeferredKeys  = 1024
	maxCopiedInApply = 512
)

// lateBulk is a value that Apply's callback replied with but did not copy:
// its bulk string goes at offset pos of c.out (see sendLate).
type lateBulk struct {
	pos int
	val []byte
}

// A reply appends the reply to a committed write command, given its
// result, which has no Err. Replies are top-level functions, so recording
// one allocates nothing.
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
	if c.batch.Len() > 0 && len(c.batch.Bytes())+store.AddSize(args...)+seqSize(c.seq) > maxBatchBytes {
		c.commit()
	}
	if c.seq != nil { // FLINT.SEQ: its OpSeq goes right before the write
		c.batch.Add(store.OpSeq, 0, c.seq...)
		c.replies = append(c.replies, nil)
		c.noteSlot(nil)
		c.seq = nil
	}
	c.batch.Add(op, flags, args...)
	c.replies = append(c.replies, reply)
	c.noteSlot(args)
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
// replies to its writes and deferred reads.
func (c *conn) commit() {
	n := c.batch.Len()
	if n == 0 || c.inApply {
		return
	}
	c.replied, c.nextRead, c.inApply = 0, 0, true
	err := c.srv.kv.Apply(c.srv.ctx, c.batch.Bytes(), c.applied)
	c.inApply = false
	c.sendLate()
	// Empty the batch before replying to failures: the replies call err,
	// which commits too.
	c.resetBatch(len(c.batch.Bytes()))
	if err != nil {
		c.failBatch(n, err)
	}
	c.replies, c.slots = c.replies[:0], c.slots[:0]
	clear(c.dargs) // let the input go
	c.dargs, c.deferred, c.deferredKeys = c.dargs[:0], c.deferred[:0], 0
}

// sendLate puts the values that Apply's callback left out of c.out in their
// places, sending the replies as usual, with the client's backpressure.
func (c *conn) sendLate() {
	if len(c.late) == 0 {
		return
	}
	replies, from := c.out, 0
	c.out = make([]byte, 0, outInitial)
	for _, l := range c.late {
		c.out = append(c.out, replies[from:l.pos]...)
		c.writeLarge(l.val)
		from = l.pos
	}
	c.out = append(c.out, replies[from:]...)
	clear(c.late) // let the values go
	c.late = c.late[:0]
}

// writeApplied is Apply's done callback: write i has taken effect. It
// replies to it and runs the reads that came before the next write.
func (c *conn) writeApplied(i int, res store.Result) {
	if c.replies[i] == nil { // an OpSeq: its write replies for it
		c.replied = i + 1
		c.runDeferred(i + 1)
		return
	}
	if res.Err != nil {
		c.writeErr(res.Err)
	} else {
		c.replies[i](c, res)
	}
	c.replied = i + 1
	c.runDeferred(i + 1)
}

// runDeferred runs the deferred reads that came after write after-1.
func (c *conn) runDeferred(after int) {
	ahead := c.nextRead // the reads before it have been prefetched or have run
	for ; c.nextRead < len(c.deferred) && c.deferred[c.nextRead].after == after; c.nextRead++ {
		if c.nextRead == ahead {
			ahead = c.prefetchReads(ahead, after)
		}
		d := c.deferred[c.nextRead]
		d.cmd.run(c, c.dargs[d.lo:d.hi])
	}
}

// prefetchReads prefetches (see store.Prefetch) the keys of the deferred
// reads that came after write after-1, from the from-th on, about
// store.PrefetchKeys of them, and returns the number of the first read it
// did not reach. Those reads run next, one after another. It loads the
// values that their replies copy in Apply's callback: not those of EXISTS
// and STRLEN, nor those longer than maxCopiedInApply (see writeLarge).
func (c *conn) prefetchReads(from, after int) int {
	vals, keys, i := c.prefetch[0][:0], c.prefetch[1][:0], from
	for ; i < len(c.deferred) && c.deferred[i].after == after && len(vals)+len(keys) < store.PrefetchKeys; i++ {
		d := c.deferred[i]
		ks := c.dargs[d.lo+1 : d.hi] // a deferred read's arguments are keys
		ks = ks[:min(len(ks), store.PrefetchKeys-len(vals)-len(keys))]
		if d.cmd.readsValues {
			vals = append(vals, ks...)
		} else {
			keys = append(keys, ks...)
		}
	}
	all := append(vals, keys...) // those whose values to load first
	c.srv.kv.Store().Prefetch(all, len(vals), maxCopiedInApply)
	clear(all) // let the input go
	clear(keys)
	c.prefetch = [2][][]byte{all[:0], keys[:0]}
	return i
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
	keys, off := c.prefetch[0][:0], 0
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
	c.srv.kv.Store().Prefetch(keys, len(keys), maxCopiedInApply)
	clear(keys) // let the input go
	clear(c.aheadArgs[:cap(c.aheadArgs)])
	c.prefetch[0] = keys[:0]
	return off
}

// failBatch replies to each write Apply did not report on, and runs the
// reads that came after it.
func (c *conn) failBatch(n int, err error) {
	msg := errorReply(err)
	for i := c.replied; i < n; i++ {
		if c.replies[i] != nil { // not an OpSeq
			c.err(c.refusedReply(err, i, msg))
		}
		c.runDeferred(i + 1)
	}
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
// Deferred reads skip the barrier: they run where the connection's writes
// before them took effect, after the barrier's point in time.
func (c *conn) read() (*store.Store, bool) {
	if !c.barrierOK && !c.inApply { // deferred reads run where their writes took effect
		if err := c.srv.kv.ReadBarrier(c.srv.ctx); err != nil {
			c.writeErr(err)
			return nil, false
		}
		c.barrierOK = true
	}
	return c.srv.kv.Store(), true
}
