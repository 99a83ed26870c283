package server

import (
	"fmt"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/slot"
	"github.com/flintkv/flint/internal/store"
)

// Transactions: MULTI, EXEC, DISCARD, WATCH and UNWATCH, with Redis's
// replies. After MULTI a connection queues its commands, replying QUEUED,
// once they pass the checks Redis makes before queuing: a known command,
// its arity, authentication, and in a cluster its slot (MOVED, CROSSSLOT).
// A command that fails them is answered with its error and marks the
// transaction, which EXEC then discards (EXECABORT).
//
// EXEC turns the queued commands into one store.OpExec entry, which the
// backend applies as one: atomic, durable as a whole, isolated from other
// readers (see store's Transactions). Each command runs as it would
// outside a transaction (see buildTx), except that its write is added to
// the transaction rather than to the connection's batch, and a simple read
// (GET, MGET, EXISTS, ...) becomes an OpRead, which reads its keys where it
// stands among the writes; so does each value that another read (GETRANGE,
// LCS, GETBIT, BITFIELD's GETs) reads through getValue, and that command
// runs again once the entry is applied, reading what its OpReads found.
// Its argument errors (a syntax error, a value that is not an integer)
// come back in EXEC's array, as in Redis, and so do its runtime errors. A
// command that neither writes nor reads keys (PING, ECHO, DBSIZE, INFO,
// SCAN) runs while EXEC builds the entry, before it is applied; RANGE,
// which reads a range of keys, cannot be queued, since it could not see
// the transaction's writes.
//
// WATCH records its keys with the store's WatchPoint, read after a read
// barrier; EXEC carries them in the entry, and the store refuses the
// transaction, which EXEC answers with a nil array, if one of them was
// written after it (see store's Watch positions). EXEC, DISCARD and
// UNWATCH forget the watched keys. Nothing of a transaction is in the
// replicated state before EXEC, so a client that disconnects leaves
// nothing behind.
//
// A connection's pipelined transactions are committed together, with the
// writes around them, as pipelined writes are (see commit.go): EXEC adds
// its entry to the connection's batch, and its reply (the array, nil when
// a watched key changed, or the error that refused the entry or the whole
// batch) is made from the entry's result at its place. So are the replies
// to a MULTI that comes while the batch holds writes and to the commands
// queued after it (a heldTx): they would come before those writes' if
// they were made at once. EXEC ends the transaction (the queue, and the
// watched keys, are forgotten) when its entry joins the batch, so a MULTI
// right after it starts the next one. WATCH commits the batch before it
// takes its position, so that the connection's own writes before it do not
// abort the transaction; a transaction with a command that runs while EXEC
// builds the entry (PING, DBSIZE, SCAN, ...: it reads no key through an
// entry) commits the batch before EXEC builds it, so that such a command
// sees the writes before it.

// txCommands are the transaction commands. exec runs them at once, also
// inside MULTI.
var txCommands = []*command{
	{name: "multi", arity: 1, flags: "noscript loading stale fast allow_busy", run: (*conn).multiCmd, batched: true,
		doc: commandDoc{summary: "Starts a transaction.", since: "1.2.0", group: "transactions", complexity: "O(1)"}},
	{name: "exec", arity: 1, flags: "noscript loading stale skip_slowlog", run: (*conn).execCmd, batched: true,
		doc: commandDoc{summary: "Executes all commands in a transaction.", since: "1.2.0", group: "transactions", complexity: "Depends on commands in the transaction"}},
	{name: "discard", arity: 1, flags: "noscript loading stale fast allow_busy", run: (*conn).discardCmd,
		doc: commandDoc{summary: "Discards a transaction.", since: "2.0.0", group: "transactions", complexity: "O(N), when N is the number of queued commands"}},
	{name: "watch", arity: -2, flags: "noscript loading stale fast allow_busy", first: 1, last: -1, step: 1, run: (*conn).watchCmd,
		doc: commandDoc{summary: "Monitors changes to keys to determine the execution of a transaction.", since: "2.2.0", group: "transactions", complexity: "O(1) for every key.", keys: "RO"}},
	{name: "unwatch", arity: 1, flags: "noscript loading stale fast allow_busy", run: (*conn).unwatchCmd,
		doc: commandDoc{summary: "Forgets about watched keys of a transaction.", since: "2.2.0", group: "transactions", complexity: "O(1)"}},
}

// Bounds on what a connection queues and watches, which keep its memory
// bounded: a command past them is refused and marks the transaction.
const (
	maxTxCommands = 100_000
	maxTxBytes    = 64 << 20 // of queued arguments
	maxWatchKeys  = 10_000
)

// notInMulti names the commands that Redis refuses inside MULTI ("Command
// not allowed inside a transaction"), and Flint's own that a transaction
// cannot hold.
var notInMulti = map[string]bool{"save": true, "flint.session": true, "flint.member": true, "flint.group": true}

// txState is a connection's transaction.
type txState struct {
	on    bool       // MULTI was called
	dirty bool       // a command was refused: EXEC discards the transaction
	cmds  [][][]byte // the queued commands, copies of their arguments
	bytes int        // of the queued arguments
	// slot is the slot of the queued commands' keys in a sharded cluster,
	// or -1 before the first; crossSlot is set once keys of two slots were
	// queued.
	slot      int
	crossSlot bool
	// held is set while the replies to MULTI and to the queued commands
	// are held, in the last of the connection's held (see heldTx), until
	// the batch is committed. Invariant: the batch then holds writes.
	held bool
	// writes is set once a command that writes is queued: a CLIENT PAUSE
	// of writes then holds EXEC, as in Redis.
	writes bool
	// asked is set when MULTI came right after ASKING: the transaction's
	// commands, EXEC's included, are asked for too, as in Redis, where
	// ASKING sent inside MULTI would be queued.
	asked bool
	// atBuild is set once a command that neither writes nor reads keys
	// through the entry is queued: it runs while EXEC builds the entry.
	atBuild bool
	watches []watch
	// build is set while EXEC builds the entry: write adds to it (see
	// buildTx), and replies records how to answer its entries.
	build   *store.Tx
	replies []reply
	// reran is set by txRead while EXEC builds the entry: the command
	// read a value, so it runs again once the entry is applied, when
	// looked holds what its reads found, in order.
	reran  bool
	looked []lookup
}

// watch is a watched key and the position it was watched at.
type watch struct {
	key []byte
	pos uint64
}

// inMulti reports whether cmd, with args, is to be queued: the connection
// is in MULTI, and cmd is not one that runs at once there.
func (c *conn) inMulti(cmd *command, args [][]byte) bool {
	switch cmd.name {
	case "multi", "exec", "discard", "watch", "quit":
		return false
	}
	return c.tx.on && !seqExec(args)
}

// refuseInMulti marks the transaction, if the connection is in MULTI, after
// a command was refused before it could be queued.
func (c *conn) refuseInMulti() {
	if c.tx.on {
		c.tx.dirty = true
	}
}

// queue queues a command inside MULTI, or refuses it.
func (c *conn) queue(cmd *command, args [][]byte) {
	n := 0
	for _, a := range args {
		n += len(a)
	}
	switch {
	case notInMulti[cmd.name]:
		c.err("ERR Command not allowed inside a transaction")
	case cmd.perGroup:
		c.err(fmt.Sprintf("ERR '%s' cannot be queued in a transaction: it could not see the transaction's writes", cmd.name))
	case len(c.tx.cmds) >= maxTxCommands || c.tx.bytes+n > maxTxBytes:
		c.err(fmt.Sprintf("ERR transaction too large: at most %d commands and %d MiB of arguments can be queued", maxTxCommands, maxTxBytes>>20))
	default:
		c.noteTxSlots(cmd, args)
		c.tx.atBuild = c.tx.atBuild || (!cmd.write && cmd.first == 0)
		c.tx.writes = c.tx.writes || cmd.write
		c.tx.cmds = append(c.tx.cmds, copyArgs(args, n))
		c.tx.bytes += n
		if c.tx.held {
			c.held[len(c.held)-1].queued++
		} else {
			c.replyQueued()
		}
		return
	}
	c.tx.dirty = true
}

// copyArgs copies args, of n bytes in all, into memory of their own.
func copyArgs(args [][]byte, n int) [][]byte {
	buf := make([]byte, 0, n)
	cp := make([][]byte, len(args))
	for i, a := range args {
		buf = append(buf, a...)
		cp[i] = buf[len(buf)-len(a):]
	}
	return cp
}

// noteTxSlots notes the slots of a queued command's keys, in a cluster:
// a transaction refused for want of a leader is redirected by its slot,
// and in a sharded cluster its keys must share one (as in Redis Cluster,
// EXEC answers CROSSSLOT otherwise).
func (c *conn) noteTxSlots(cmd *command, args [][]byte) {
	if c.srv.cluster == nil {
		return
	}
	if cmd.name == "flint.seq" { // the keys of the command it wraps
		if cmd = commands[string(c.lowerName(args[4]))]; cmd == nil {
			return
		}
		args = args[4:]
	}
	last := cmd.last
	if last < 0 {
		last += len(args)
	}
	for i := cmd.first; cmd.first > 0 && cmd.step > 0 && i <= last && i < len(args); i += cmd.step {
		switch s := slot.Of(args[i]); {
		case c.tx.slot < 0:
			c.tx.slot = s
		case s != c.tx.slot && c.srv.sharded != nil:
			c.tx.crossSlot = true
		}
	}
}

func (c *conn) multiCmd([][]byte) {
	if c.tx.on {
		c.err("ERR MULTI calls can not be nested")
		return
	}
	c.tx.on, c.tx.slot, c.tx.asked = true, -1, c.asked
	if c.batch.Len() > 0 { // its reply goes after the batch's
		c.held = append(c.held, heldTx{after: c.batch.Len()})
		c.tx.held = true
		return
	}
	c.ok()
}

// replyHeld replies to a held MULTI and the queued commands after it.
func (c *conn) replyHeld(queued int) {
	c.ok()
	for range queued {
		c.replyQueued()
	}
}

func (c *conn) replyQueued() { c.out = protocol.AppendSimple(c.out, "QUEUED") }

func (c *conn) discardCmd([][]byte) {
	if !c.tx.on {
		c.err("ERR DISCARD without MULTI")
		return
	}
	c.endTx()
	c.ok()
}

func (c *conn) unwatchCmd([][]byte) {
	c.tx.watches = nil
	c.ok()
}

// endTx forgets the transaction and the watched keys.
func (c *conn) endTx() { c.tx = txState{} }

// watchCmd is WATCH key [key ...].
func (c *conn) watchCmd(args [][]byte) {
	if c.tx.on {
		c.err("ERR WATCH inside MULTI is not allowed")
		return
	}
	if len(c.tx.watches)+len(args)-1 > maxWatchKeys {
		c.err(fmt.Sprintf("ERR too many watched keys: a connection watches at most %d", maxWatchKeys))
		return
	}
	s, ok := c.read()
	if !ok {
		return
	}
	pos := s.WatchPoint()
	for _, k := range args[1:] {
		c.tx.watches = append(c.tx.watches, watch{key: append([]byte(nil), k...), pos: pos})
	}
	c.ok()
}

// txItem is how EXEC answers one queued command: from the results of
// entries from..to-1 of the transaction (a write's, after an OpSeq's for
// FLINT.SEQ, or an OpRead's, for read), by running it again (rerun, with
// its arguments) with what its OpReads found, or with the reply it made
// while the entry was built (made).
type txItem struct {
	from, to int
	read     *command
	rerun    *command
	args     [][]byte
	made     []byte
}

// execCmd is EXEC. Its entry joins the batch, with a reply that answers
// it from the entry's result (see replyExec).
func (c *conn) execCmd([][]byte) {
	switch {
	case !c.tx.on:
		c.err("ERR EXEC without MULTI")
		return
	case c.tx.dirty:
		c.endTx()
		c.err("EXECABORT Transaction discarded because of previous errors.")
		return
	case c.tx.crossSlot:
		c.endTx()
		c.err("CROSSSLOT Keys in request don't hash to the same slot")
		return
	}
	if c.tx.atBuild { // its commands that run now see the writes before it
		c.commit()
	}
	seq := c.seq // FLINT.SEQ EXEC: the transaction is one write of the session
	c.seq = nil  // not its commands'
	var tx store.Tx
	items := c.buildTx(&tx)
	replies, slot := c.tx.replies, int32(c.tx.slot)
	c.endTx()
	if tx.Len() == 0 && tx.Watched() == 0 { // nothing to apply: reply now
		c.commit()
		c.replyTx(items, nil, nil)
		return
	}
	c.seq = seq // add puts its OpSeq before the OpExec
	c.add(store.OpExec, 0, func(c *conn, res store.Result) { c.replyExec(items, replies, res) }, slot, tx.Args())
}

// replyExec answers EXEC, whose entry applied with res, from items and its
// entries' replies (see replyTx).
func (c *conn) replyExec(items []txItem, replies []reply, res store.Result) {
	if !res.Done { // a watched key changed
		c.out = protocol.AppendNullArray(c.out, c.proto)
		return
	}
	c.replyTx(items, replies, res.Sub)
}

// buildTx adds the queued commands' entries to tx, and returns how to
// answer each. Each command runs as it would outside MULTI, with write
// adding to tx; what it replies meanwhile (an error in its arguments, or
// the reply of a command that does not write) is kept as its answer.
func (c *conn) buildTx(tx *store.Tx) []txItem {
	for _, w := range c.tx.watches {
		tx.Watch(w.key, w.pos)
	}
	c.tx.build = tx
	defer func() { c.tx.build = nil }()
	items := make([]txItem, len(c.tx.cmds))
	for i, args := range c.tx.cmds {
		cmd := commands[string(c.lowerName(args[0]))] // known: queue checked it
		if cmd.subs != nil && len(args) > 1 {
			cmd = c.subcommand(cmd, args[1]) // known too
		}
		it := &items[i]
		it.from = tx.Len()
		if cmd.reply != nil {
			tx.Add(store.OpRead, 0, args[1:]...)
			c.tx.replies = append(c.tx.replies, nil)
			it.read = cmd
		} else {
			start := len(c.out)
			c.tx.reran = false
			cmd.run(c, args)
			if c.tx.reran {
				it.rerun, it.args = cmd, args
			} else {
				it.made = append([]byte(nil), c.out[start:]...)
			}
			c.out = c.out[:start]
		}
		it.to = tx.Len()
	}
	return items
}

// txRead is getValue inside a transaction, with op OpRead (or deadline,
// with OpDeadline). While EXEC builds the entry, it adds an op entry for
// key, marks the command to run again, and answers that key is missing;
// when the command runs again, it answers what the entry found.
func (c *conn) txRead(op store.Op, key []byte) (val []byte, found, ok bool) {
	if c.tx.build != nil {
		c.tx.build.Add(op, 0, key)
		c.tx.replies = append(c.tx.replies, nil)
		c.tx.reran = true
		return nil, false, true
	}
	if len(c.tx.looked) == 0 { // it reads more than it did the first time
		return nil, false, true
	}
	l := c.tx.looked[0]
	c.tx.looked = c.tx.looked[1:]
	return l.val, l.found, true
}

// txWrite is write while EXEC builds its entry: it adds the write, after
// its OpSeq for FLINT.SEQ, to the transaction.
func (c *conn) txWrite(op store.Op, flags byte, reply reply, args [][]byte) {
	if c.seq != nil {
		c.tx.build.Add(store.OpSeq, 0, c.seq...)
		c.tx.replies = append(c.tx.replies, nil)
		c.seq = nil
	}
	c.tx.build.Add(op, flags, args...)
	c.tx.replies = append(c.tx.replies, reply)
}

// replyTx answers EXEC: an array of each queued command's reply, from
// items, the entries' replies and their results.
func (c *conn) replyTx(items []txItem, replies []reply, results []store.Result) {
	c.out = protocol.AppendArray(c.out, len(items))
	for _, it := range items {
		switch {
		case it.read != nil:
			it.read.reply(c, lookups(results[it.from:it.to]))
		case it.rerun != nil:
			c.tx.looked = lookups(results[it.from:it.to])
			it.rerun.run(c, it.args)
			c.tx.looked = nil
		case it.from < it.to:
			res := results[it.to-1] // the write's: an OpSeq's comes before it
			if res.Err != nil {
				c.out = protocol.AppendError(c.out, errorReply(res.Err))
			} else {
				replies[it.to-1](c, res)
			}
		default:
			c.out = append(c.out, it.made...)
		}
	}
}

// lookups returns what the OpReads with these results found, in order.
func lookups(results []store.Result) []lookup {
	var got []lookup
	for _, res := range results {
		for _, r := range res.Sub {
			got = append(got, lookup{r.Val, r.Found})
		}
	}
	return got
}
