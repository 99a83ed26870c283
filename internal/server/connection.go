package server

import (
	"fmt"
	"strings"

	"github.com/flintkv/flint/internal/protocol"
)

// connCommands manage the connection itself.
var connCommands = []*command{
	{name: "ping", arity: -1, flags: "fast", run: (*conn).ping},
	{name: "echo", arity: 2, flags: "fast", run: (*conn).echo},
	{name: "hello", arity: -1, flags: "no-auth fast", run: (*conn).hello},
	{name: "auth", arity: -2, flags: "no-auth fast", run: (*conn).auth},
	{name: "select", arity: 2, flags: "fast", run: (*conn).selectDB},
	{name: "quit", arity: -1, flags: "no-auth fast", run: (*conn).quitCmd},
	{name: "client", arity: -2, flags: "", subs: clientCommands},
}

func (c *conn) ping(args [][]byte) {
	switch {
	case len(args) > 2:
		c.errArity("ping")
	case c.inSubscribedContext(): // as Redis: a pong message, in its shape
		var msg []byte
		if len(args) == 2 {
			msg = args[1]
		}
		c.out = protocol.AppendArray(c.out, 2)
		c.bulkString("pong")
		c.out = protocol.AppendBulk(c.out, msg)
	case len(args) == 1:
		c.out = protocol.AppendSimple(c.out, "PONG")
	default:
		c.out = protocol.AppendBulk(c.out, args[1])
	}
}

func (c *conn) echo(args [][]byte) { c.out = protocol.AppendBulk(c.out, args[1]) }

func (c *conn) quitCmd([][]byte) {
	c.ok()
	c.quit = true
}

func (c *conn) selectDB(args [][]byte) {
	n, ok := intArg(args[1])
	switch {
	case !ok:
		c.errNotInt()
	case n != 0:
		c.err("ERR DB index is out of range")
	default:
		c.ok()
	}
}

// auth is AUTH [username] password; the only user is "default".
func (c *conn) auth(args [][]byte) {
	if len(args) > 3 {
		c.errSyntax()
		return
	}
	if !c.srv.needPass() && len(args) == 2 {
		c.err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
		return
	}
	user, pass := []byte("default"), args[len(args)-1]
	if len(args) == 3 {
		user = args[1]
	}
	if !c.login(user, pass) {
		c.err("WRONGPASS invalid username-password pair or user is disabled.")
		return
	}
	c.ok()
}

// login checks credentials as Redis does for its default user: with no
// password configured, any password is accepted.
func (c *conn) login(user, pass []byte) bool {
	ok := string(user) == "default" && c.srv.checkPass(pass)
	if ok && !c.authed {
		c.authed = true
		c.parser.SetLimits(c.srv.lim)
	}
	return ok
}

// hello is HELLO [protover [AUTH username password] [SETNAME clientname]].
func (c *conn) hello(args [][]byte) {
	proto := c.proto
	if len(args) >= 2 {
		v, ok := intArg(args[1])
		if !ok {
			c.err("ERR Protocol version is not an integer or out of range")
			return
		}
		if v != 2 && v != 3 {
			c.err("NOPROTO unsupported protocol version")
			return
		}
		proto = protocol.Version(v)
	}
	var name []byte
	for i := 2; i < len(args); i++ {
		switch opt := strings.ToLower(string(args[i])); {
		case opt == "auth" && i+2 < len(args):
			if !c.login(args[i+1], args[i+2]) {
				c.err("WRONGPASS invalid username-password pair or user is disabled.")
				return
			}
			i += 2
		case opt == "setname" && i+1 < len(args):
			name = args[i+1]
			if !validName(name) {
				c.err("ERR Client names cannot contain spaces, newlines or special characters.")
				return
			}
			i++
		default:
			c.err(fmt.Sprintf("ERR Syntax error in HELLO option '%s'", truncate(args[i])))
			return
		}
	}
	if !c.authed {
		c.err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	if name != nil {
		c.setName(name)
	}
	c.setProto(proto)
	c.out = protocol.AppendMap(c.out, 7, c.proto)
	c.bulkString("server")
	c.bulkString("flint")
	c.bulkString("version")
	c.bulkString(redisVersion)
	c.bulkString("proto")
	c.int(int64(c.proto))
	c.bulkString("id")
	c.int(c.id)
	mode, role := c.mode()
	c.bulkString("mode")
	c.bulkString(mode)
	c.bulkString("role")
	c.bulkString(role)
	c.bulkString("modules")
	c.out = protocol.AppendArray(c.out, 0)
}

// redisVersion is the Redis version whose commands Flint answers like, for
// clients that check it.
const redisVersion = "7.0.0"

// validName reports whether a client name has no spaces or control characters.
func validName(b []byte) bool {
	for _, ch := range b {
		if ch <= ' ' || ch > '~' {
			return false
		}
	}
	return true
}

func (c *conn) setName(name []byte) {
	s := string(name)
	c.info.name.Store(&s)
}

func load(p interface{ Load() *string }) string {
	if s := p.Load(); s != nil {
		return *s
	}
	return ""
}
