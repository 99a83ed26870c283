package server

import (
	"strconv"
	"strings"

	"github.com/flintkv/flint/internal/store"
)

// Client sessions make a write that a client retries take effect once
// (the Raft dissertation's section 6.3): a client opens a session with
// FLINT.SESSION, which replies its client id, and sends each write as
//
//	FLINT.SEQ <client id> <sequence number> <lowest unacknowledged> <command> [arg ...]
//
// with a sequence number of its own, counting up from 1, and the lowest
// number whose reply it has not seen yet. The store keeps the replies of a
// session's writes until the client acknowledges them (by the lowest
// unacknowledged number), and answers a write it applied already with the
// reply it kept, without applying it again. A session that stays unused
// for the store's session TTL expires: its writes then get SESSIONEXPIRED,
// and the client opens a new one. Sessions are in the replicated state, so
// a retry through another member, after a failover, takes effect once too.
// Writes outside FLINT.SEQ take effect once per send, as in Redis.
//
// A transaction is one write of its session: the client sends MULTI, its
// commands as they are, and FLINT.SEQ <client id> <seq> <lowest> EXEC,
// whose OpSeq wraps the transaction's OpExec. A resent transaction is then
// answered with the reply of its one application, reads included.

// sessionCmd is FLINT.SESSION: open a session.
func (c *conn) sessionCmd([][]byte) { c.write(store.OpSessionOpen, 0, replyInt) }

// seqCmd is FLINT.SEQ: run a write command, or EXEC, in a session.
func (c *conn) seqCmd(args [][]byte) {
	var seq [3][]byte
	for i := range seq {
		n, err := strconv.ParseUint(string(args[1+i]), 10, 64)
		if err != nil || n == 0 {
			c.err("ERR FLINT.SEQ's client id, sequence number and lowest unacknowledged number must be positive integers")
			return
		}
		seq[i] = store.Uint64Arg(n)
	}
	inner := args[4:]
	cmd := commands[strings.ToLower(string(inner[0]))]
	switch {
	case cmd == nil || (!cmd.write && cmd.name != "exec") || strings.HasPrefix(cmd.name, "flint."): // FLINT.SEQ, SESSION, SLOTS, MAPSET
		c.err("ERR FLINT.SEQ runs a write command, such as SET, INCR or DEL, or EXEC")
	case (cmd.arity > 0 && len(inner) != cmd.arity) || (cmd.arity < 0 && len(inner) < -cmd.arity):
		c.errArity(cmd.name)
	default:
		c.seq = seq[:]
		cmd.run(c, inner)
		c.seq = nil // the command refused its arguments, writing nothing, or was EXEC
	}
}

// seqSize is how many bytes an OpSeq with these arguments adds to a
// batch, or 0 with none.
func seqSize(seq [][]byte) int {
	if seq == nil {
		return 0
	}
	return store.AddSize(seq...)
}

// seqExec reports whether args are FLINT.SEQ wrapping EXEC, which runs at
// once inside MULTI.
func seqExec(args [][]byte) bool {
	return len(args) == 5 && strings.EqualFold(string(args[0]), "flint.seq") && strings.EqualFold(string(args[4]), "exec")
}
