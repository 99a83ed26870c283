package server

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flintkv/flint/internal/protocol"
)

// command describes one command the server knows.
//
// To add a command, add it to a list of its file's (as keyCommands), which
// init adds to the table, and fill, beyond name, arity, flags and run:
//   - first, last, step if it has keys: COMMAND INFO derives its key spec
//     from them, which cluster clients use to find its keys, and the
//     server routes it by its first key's slot;
//   - doc: its summary, since, group and complexity for COMMAND DOCS, the
//     flags of its key spec (doc.keys, as Redis's: "RW access update"), or
//     its key specs (doc.specs) if its keys differ in flags, and any ACL
//     categories beyond those its flags and group imply (see aclCategories);
//   - subs, for a container command (CLIENT, CONFIG): its subcommands,
//     named "client|list", which exec dispatches to by the first argument
//     and INFO commandstats counts apart.
//
// commanddocs.go holds the docs of the commands that predate doc, by name.
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
	// batched is set for MULTI and EXEC, which exec runs without
	// committing the batch of writes first: they join it (see tx.go).
	batched bool
	// readsValues is set for the simple reads that reply with their keys'
	// values, not only with whether they exist or their values' lengths.
	readsValues bool
	// perGroup is set for a command that answers for the keys its group
	// holds (RANGE): in a sharded cluster it is not routed by slot, and a
	// client asks every group.
	perGroup bool
	doc      commandDoc
	subs     []*command
	// id numbers the command and its subcommands from 0, in init, for the
	// statistics of INFO commandstats (see cmdstats.go).
	id int
	// parent is a subcommand's container command; nil for a command.
	parent *command
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
	for _, list := range [][]*command{connCommands, keyCommands, adminCommands, stringCommands, keyspaceCommands, introspectCommands, pubsubCommands, txCommands, expiryCommands, rolesCommands, groupCommands} {
		for _, cmd := range list {
			commands[cmd.name] = cmd
		}
	}
	for _, cmd := range sortedCommands() {
		prepare(cmd, nil)
		for _, sub := range cmd.subs {
			prepare(sub, cmd)
		}
	}
}

// prepare fills the fields of cmd that init derives, and numbers it.
func prepare(cmd, parent *command) {
	cmd.write = slices.Contains(strings.Fields(cmd.flags), flagWrite)
	if cmd.reply != nil {
		cmd.run = func(c *conn, args [][]byte) { c.readNow(cmd, args) }
	}
	if cmd.doc.summary == "" {
		cmd.doc = oldDocs[cmd.name]
	}
	cmd.parent = parent
	cmd.id = len(allCommands)
	allCommands = append(allCommands, cmd)
}

// allCommands lists every command and subcommand, by id.
var allCommands []*command

// unsupported names commands that Redis has and Flint deliberately does not,
// with the reason given to the client.
var unsupported = map[string]string{}

func init() {
	const types = "Flint stores only string values"
	for _, n := range strings.Fields(`lpush rpush lpop rpop llen lrange lindex lset lrem linsert ltrim blpop brpop lmove
		hset hget hmset hmget hdel hgetall hexists hincrby hkeys hvals hlen hsetnx
		sadd srem smembers sismember scard spop srandmember sinter sunion sdiff
		blmove blmpop brpoplpush lmpop lpos lpushx rpoplpush rpushx sort sort_ro
		hincrbyfloat hrandfield hscan hstrlen sdiffstore sintercard sinterstore smismember smove sscan sunionstore
		bzmpop bzpopmax bzpopmin zcount zdiff zdiffstore zinter zintercard zinterstore zlexcount zmpop zmscore
		zpopmax zpopmin zrandmember zrangebylex zrangestore zremrangebylex zremrangebyrank zremrangebyscore
		zrevrangebylex zrevrangebyscore zrevrank zscan zunion zunionstore
		xack xautoclaim xclaim xdel xgroup xinfo xpending xreadgroup xrevrange xsetid xtrim pfdebug pfselftest
		geodist geohash geopos georadius georadius_ro georadiusbymember georadiusbymember_ro geosearch geosearchstore
		zadd zrem zrange zrangebyscore zscore zcard zincrby zrank zrevrange
		xadd xread xrange xlen pfadd pfcount pfmerge geoadd`) {
		unsupported[n] = types
	}
}

// exec runs one command. A write joins the batch of writes, and so does a
// simple read that follows one (see commit.go); anything else commits that
// batch first, then appends its own reply.
func (c *conn) exec(args [][]byte) {
	if c.replyOff || c.skipNext {
		c.execMuted(args)
		return
	}
	c.dispatch(args)
}

// dispatch runs one command whose reply is wanted (see exec).
func (c *conn) dispatch(args [][]byte) {
	c.commands++
	c.keySlot = -1
	c.asked, c.asking = c.asking || c.tx.asked, false
	name := c.lowerName(args[0])
	cmd, ok := commands[string(name)]
	if ok && cmd.subs != nil && len(args) > 1 {
		if cmd = c.subcommand(cmd, args[1]); cmd == nil {
			c.refuseInMulti()
			c.maybeFlush()
			return
		}
	}
	if ok {
		c.lastCmd = cmd
	}
	switch { // in Redis's order: unknown command, arity, authentication; a refusal marks a transaction
	case !ok:
		c.commit()
		c.unknown(string(name), args)
		c.refuseInMulti()
	case (cmd.arity > 0 && len(args) != cmd.arity) || (cmd.arity < 0 && len(args) < -cmd.arity):
		c.errArity(cmd.name)
		c.count(cmd).rejected++
		c.refuseInMulti()
	case !c.authed && !strings.Contains(cmd.flags, flagNoAuth):
		c.err("NOAUTH Authentication required.")
		c.count(cmd).rejected++
		c.refuseInMulti()
	case c.redirect(cmd, args):
		c.count(cmd).rejected++
		c.refuseInMulti()
	case c.inSubscribedContext() && !subscribedOK(cmd.name):
		c.errSubscribed(cmd, args)
		c.count(cmd).rejected++
		c.refuseInMulti()
	case c.inMulti(cmd, args):
		c.queue(cmd, args)
	case cmd.reply != nil && c.batch.Len() > 0 && !c.srv.paused.Load():
		c.deferRead(cmd, args)
		c.count(cmd).calls++
	default:
		c.call(cmd, args)
	}
	c.maybeFlush()
}

// subcommand returns the subcommand of container that arg names, or
// replies as Redis does and returns nil if it has none of that name.
func (c *conn) subcommand(container *command, arg []byte) *command {
	name := container.name + "|" + strings.ToLower(string(arg))
	for _, sub := range container.subs {
		if sub.name == name {
			return sub
		}
	}
	c.commit()
	c.err(fmt.Sprintf("ERR unknown subcommand '%s'. Try %s HELP.", truncate(arg), strings.ToUpper(container.name)))
	return nil
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
	c.failed(msg)
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
