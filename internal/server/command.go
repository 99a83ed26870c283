package server

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flintkv/flint/internal/protocol"
)

// command describes one command the server knows.
type command struct {
	name  string
	arity int // as Redis: n means exactly n arguments with the name; -n means at least n
	flags string
	// first, last, step locate the keys among the arguments, as COMMAND reports them.
	first, last, step int
	run               func(c *conn, args [][]byte)
	// reply is set for the simple reads, whose arguments after the name
	// are all keys: it replies from what their keys were found to hold,
	// one lookup each. Such a read may be deferred among the writes of a
	// batch (see commit.go); init sets its run, which runs it at once.
	reply func(c *conn, got []lookup)
	// write is set in init from flags. A write command's run adds it to the
	// batch of writes (see commit.go) or rejects it with err.
	write bool
	// readsValues is set for the simple reads that reply with their keys'
	// values, not only with whether they exist or their values' lengths.
	readsValues bool
	// perGroup is set for a command that answers for the keys its group
	// holds (RANGE): in a sharded cluster it is not routed by slot, and a
	// client asks every group.
	perGroup bool
}

// Command flags (space-separated in command.flags), as COMMAND INFO shows them.
const (
	flagWrite    = "write"
	flagReadonly = "readonly"
	flagNoAuth   = "no-auth"
)

// commands is the command table, keyed by lower-case name. It is filled in
// init because some handlers (COMMAND) refer to it.
var commands map[string]*command

func init() {
	commands = make(map[string]*command)
	for _, list := range [][]*command{connCommands, keyCommands, adminCommands, expiryCommands} {
		for _, cmd := range list {
			cmd.write = slices.Contains(strings.Fields(cmd.flags), flagWrite)
			if cmd.reply != nil {
				cmd.run = func(c *conn, args [][]byte) { c.readNow(cmd, args) }
			}
			commands[cmd.name] = cmd
		}
	}
}

// unsupported names commands that Redis has and Flint deliberately does not,
// with the reason given to the client.
var unsupported = map[string]string{}

func init() {
	const types = "Flint stores only string values"
	for _, n := range strings.Fields(`lpush rpush lpop rpop llen lrange lindex lset lrem linsert ltrim blpop brpop lmove
		hset hget hmset hmget hdel hgetall hexists hincrby hkeys hvals hlen hsetnx
		sadd srem smembers sismember scard spop srandmember sinter sunion sdiff
		zadd zrem zrange zrangebyscore zscore zcard zincrby zrank zrevrange
		xadd xread xrange xlen pfadd pfcount pfmerge setbit getbit bitcount bitop geoadd
		publish subscribe psubscribe`) {
		unsupported[n] = types
	}
	const tx = "Flint has no MULTI/EXEC transactions yet; multi-key commands (MSET, MSETNX, DEL) are atomic"
	for _, n := range strings.Fields("multi exec discard watch unwatch") {
		unsupported[n] = tx
	}
}

// exec runs one command. A write joins the batch of writes, and so does a
// simple read that follows one (see commit.go); anything else commits that
// batch first, then appends its own reply.
func (c *conn) exec(args [][]byte) {
	c.commands++
	name := c.lowerName(args[0])
	cmd, ok := commands[string(name)]
	switch { // in Redis's order: unknown command, arity, authentication
	case !ok:
		c.commit()
		c.unknown(string(name), args)
	case (cmd.arity > 0 && len(args) != cmd.arity) || (cmd.arity < 0 && len(args) < -cmd.arity):
		c.errArity(cmd.name)
	case !c.authed && !strings.Contains(cmd.flags, flagNoAuth):
		c.err("NOAUTH Authentication required.")
	case c.redirect(cmd, args):
	case cmd.reply != nil && c.batch.Len() > 0:
		c.deferRead(cmd, args)
	default:
		if !cmd.write {
			c.commit()
		}
		cmd.run(c, args)
	}
	c.maybeFlush()
}

// lowerName returns the lower-cased command name in scratch space valid
// until the next command. It allocates only for names longer than the
// scratch buffer.
func (c *conn) lowerName(b []byte) []byte {
	if len(b) > len(c.lower) {
		return []byte(strings.ToLower(string(b)))
	}
	l := c.lower[:len(b)]
	for i, ch := range b {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		l[i] = ch
	}
	return l
}

// unknown replies to a command Flint does not have. The message is Redis's,
// byte for byte: the name cut to 128 bytes, then arguments while the list
// is shorter than 128 bytes, each cut to what is left of those 128.
func (c *conn) unknown(name string, args [][]byte) {
	if why, ok := unsupported[name]; ok {
		c.err(fmt.Sprintf("ERR '%s' is not supported: %s", name, why))
		return
	}
	var list []byte
	for _, a := range args[1:] {
		if len(list) >= maxQuoted {
			break
		}
		list = append(list, '\'')
		list = append(list, a[:min(len(a), maxQuoted-len(list)+1)]...)
		list = append(list, '\'', ' ')
	}
	c.err(fmt.Sprintf("ERR unknown command '%s', with args beginning with: %s", truncate(args[0]), list))
}

// maxQuoted is how much of a client's argument an error message quotes.
const maxQuoted = 128

// truncate cuts an argument quoted in an error message to maxQuoted bytes,
// as Redis does.
func truncate(a []byte) string {
	return string(a[:min(len(a), maxQuoted)])
}

// Reply helpers.

// err replies with an error. It commits the batch of writes first: a write
// command that rejects its arguments replies at once, after the writes
// before it.
func (c *conn) err(msg string) {
	c.commit()
	c.out = protocol.AppendError(c.out, msg)
}

func (c *conn) ok()                 { c.out = protocol.AppendOK(c.out) }
func (c *conn) int(n int64)         { c.out = protocol.AppendInt(c.out, n) }
func (c *conn) null()               { c.out = protocol.AppendNull(c.out, c.proto) }
func (c *conn) bulkString(s string) { c.out = protocol.AppendBulkString(c.out, s) }
func (c *conn) bool(b bool) {
	if b {
		c.int(1)
	} else {
		c.int(0)
	}
}

// value replies with a bulk string, or null when the key was not found.
func (c *conn) value(v []byte, found bool) {
	if !found {
		c.null()
		return
	}
	c.writeLarge(v)
}

func (c *conn) errArity(name string) {
	c.err("ERR wrong number of arguments for '" + name + "' command")
}

func (c *conn) errSyntax() { c.err("ERR syntax error") }

func (c *conn) errNotInt() { c.err("ERR value is not an integer or out of range") }

// intArg parses a command argument as an int64, Redis-style.
func intArg(b []byte) (int64, bool) { return protocol.ParseInt(b) }
