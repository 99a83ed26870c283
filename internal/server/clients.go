package server

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flintkv/flint/internal/protocol"
)

// clientCommands are CLIENT's subcommands.
var clientCommands = []*command{
	{name: "client|id", arity: 2, flags: "noscript loading stale", run: (*conn).clientID,
		doc: commandDoc{summary: "Returns the unique client ID of the connection.", since: "5.0.0", complexity: "O(1)"}},
	{name: "client|getname", arity: 2, flags: "noscript loading stale", run: (*conn).clientGetName,
		doc: commandDoc{summary: "Returns the name of the connection.", since: "2.6.9", complexity: "O(1)"}},
	{name: "client|setname", arity: 3, flags: "noscript loading stale", run: (*conn).clientSetName,
		doc: commandDoc{summary: "Sets the connection name.", since: "2.6.9", complexity: "O(1)"}},
	{name: "client|setinfo", arity: 4, flags: "noscript loading stale", run: (*conn).clientSetInfo,
		doc: commandDoc{summary: "Sets information specific to the client or connection.", since: "7.2.0", complexity: "O(1)"}},
	{name: "client|info", arity: 2, flags: "noscript loading stale", run: (*conn).clientInfo,
		doc: commandDoc{summary: "Returns information about the connection.", since: "6.2.0", complexity: "O(1)", tips: "nondeterministic_output"}},
	{name: "client|list", arity: -2, flags: "admin noscript loading stale", run: (*conn).clientList,
		doc: commandDoc{summary: "Lists open connections.", since: "2.4.0", complexity: "O(N) where N is the number of client connections", tips: "nondeterministic_output"}},
	{name: "client|kill", arity: -3, flags: "admin noscript loading stale", run: (*conn).clientKill,
		doc: commandDoc{summary: "Terminates open connections.", since: "2.4.0", complexity: "O(N) where N is the number of client connections"}},
	{name: "client|pause", arity: -3, flags: "admin noscript loading stale", run: (*conn).clientPause,
		doc: commandDoc{summary: "Suspends commands processing.", since: "3.0.0", complexity: "O(1)"}},
	{name: "client|unpause", arity: 2, flags: "admin noscript loading stale", run: (*conn).clientUnpause,
		doc: commandDoc{summary: "Resumes processing commands from paused clients.", since: "6.2.0", complexity: "O(N) Where N is the number of paused clients"}},
	{name: "client|reply", arity: 3, flags: "noscript loading stale", run: (*conn).clientReply,
		doc: commandDoc{summary: "Instructs the server whether to reply to commands.", since: "3.2.0", complexity: "O(1)"}},
	{name: "client|no-evict", arity: 3, flags: "admin noscript loading stale", run: (*conn).clientNoEvict,
		doc: commandDoc{summary: "Sets the client eviction mode of the connection.", since: "7.0.0", complexity: "O(1)"}},
	{name: "client|help", arity: 2, flags: "loading stale", run: (*conn).clientHelp,
		doc: commandDoc{summary: "Returns helpful text about the different subcommands.", since: "5.0.0", complexity: "O(1)"}},
}

func (c *conn) clientID([][]byte) { c.int(c.id) }

func (c *conn) clientGetName([][]byte) {
	if n := load(&c.info.name); n != "" {
		c.bulkString(n)
	} else {
		c.null()
	}
}

func (c *conn) clientSetName(args [][]byte) {
	if !validName(args[2]) {
		c.err("ERR Client names cannot contain spaces, newlines or special characters.")
		return
	}
	c.setName(args[2])
	c.ok()
}

func (c *conn) clientSetInfo(args [][]byte) {
	attr, val := args[2], args[3]
	if !validName(val) {
		c.err("ERR lib-name and lib-ver cannot contain spaces, newlines or special characters.")
		return
	}
	v := string(val)
	switch strings.ToLower(string(attr)) {
	case "lib-name":
		c.info.libName.Store(&v)
	case "lib-ver":
		c.info.libVer.Store(&v)
	default:
		c.err(fmt.Sprintf("ERR Unrecognized option '%s'", truncate(attr)))
		return
	}
	c.ok()
}

func (c *conn) clientInfo([][]byte) {
	c.publishInfo()
	c.out = protocol.AppendVerbatim(c.out, c.describe(time.Now()), c.proto)
}

// clientList is CLIENT LIST [TYPE type | ID id [id ...]].
func (c *conn) clientList(args [][]byte) {
	match := func(*conn) bool { return true }
	switch {
	case len(args) == 2:
	case len(args) == 4 && strings.EqualFold(string(args[2]), "type"):
		typ, ok := clientType(args[3])
		if !ok {
			c.err(fmt.Sprintf("ERR Unknown client type '%s'", truncate(args[3])))
			return
		}
		match = func(o *conn) bool { return o.typeName() == typ }
	case len(args) >= 4 && strings.EqualFold(string(args[2]), "id"):
		ids := map[int64]bool{}
		for _, a := range args[3:] {
			id, ok := intArg(a)
			if !ok || id <= 0 {
				c.err("ERR Invalid client ID")
				return
			}
			ids[id] = true
		}
		match = func(o *conn) bool { return ids[o.id] }
	default:
		c.errSyntax()
		return
	}
	c.publishInfo()
	now := time.Now()
	var b strings.Builder
	for _, o := range c.srv.clients() {
		if match(o) {
			b.WriteString(o.describe(now))
		}
	}
	c.out = protocol.AppendVerbatim(c.out, b.String(), c.proto)
}

// clientType returns the canonical name of a client type as CLIENT LIST
// and KILL take it. A Flint client is of type pubsub while it has
// subscriptions, else normal (see typeName).
func clientType(b []byte) (string, bool) {
	switch t := strings.ToLower(string(b)); t {
	case "normal", "master", "pubsub":
		return t, true
	case "replica", "slave":
		return "replica", true
	}
	return "", false
}

// typeName is the connection's client type: pubsub while it has
// subscriptions, as Redis has it, else normal. It may be called from any
// goroutine.
func (c *conn) typeName() string {
	for k := range c.info.subs {
		if c.info.subs[k].Load() > 0 {
			return "pubsub"
		}
	}
	return "normal"
}

// clients returns the open connections, in order of id.
func (s *Server) clients() []*conn {
	s.mu.Lock()
	list := make([]*conn, 0, len(s.mu.conns))
	for _, c := range s.mu.conns {
		list = append(list, c)
	}
	s.mu.Unlock()
	slices.SortFunc(list, func(a, b *conn) int { return cmp.Compare(a.id, b.id) })
	return list
}

// clientKill is CLIENT KILL addr (the old form: OK, or an error if no
// client has that address) and CLIENT KILL <filter> <value> ... (the
// number of clients killed): ID, ADDR, LADDR, TYPE, USER and SKIPME, as in
// Redis. A killed client's connection is closed at once; the client
// killing itself gets its reply first.
func (c *conn) clientKill(args [][]byte) {
	if len(args) == 3 {
		addr := string(args[2])
		killed := c.kill(func(o *conn) bool { return o.nc.RemoteAddr().String() == addr })
		if killed == 0 {
			c.err("ERR No such client")
			return
		}
		c.ok()
		return
	}
	if len(args)%2 != 0 {
		c.errSyntax()
		return
	}
	match, ok := c.killFilter(args[2:])
	if ok {
		c.int(int64(c.kill(match)))
	}
}

// killFilter parses CLIENT KILL's filters into a predicate; it replies
// and returns false if they are malformed.
func (c *conn) killFilter(args [][]byte) (func(*conn) bool, bool) {
	var tests []func(*conn) bool
	skipMe := true
	for i := 0; i < len(args); i += 2 {
		val := string(args[i+1])
		switch strings.ToLower(string(args[i])) {
		case "id":
			id, ok := intArg(args[i+1])
			if !ok || id <= 0 {
				c.err("ERR client-id should be greater than 0")
				return nil, false
			}
			tests = append(tests, func(o *conn) bool { return o.id == id })
		case "addr":
			tests = append(tests, func(o *conn) bool { return o.nc.RemoteAddr().String() == val })
		case "laddr":
			tests = append(tests, func(o *conn) bool { return o.nc.LocalAddr().String() == val })
		case "type":
			typ, ok := clientType(args[i+1])
			if !ok {
				c.err(fmt.Sprintf("ERR Unknown client type '%s'", truncate(args[i+1])))
				return nil, false
			}
			tests = append(tests, func(o *conn) bool { return o.typeName() == typ })
		case "user":
			if val != "default" {
				c.err(fmt.Sprintf("ERR No such user '%s'", truncate(args[i+1])))
				return nil, false
			}
		case "skipme":
			switch strings.ToLower(val) {
			case "yes":
				skipMe = true
			case "no":
				skipMe = false
			default:
				c.errSyntax()
				return nil, false
			}
		default:
			c.errSyntax()
			return nil, false
		}
	}
	return func(o *conn) bool {
		if skipMe && o == c {
			return false
		}
		for _, t := range tests {
			if !t(o) {
				return false
			}
		}
		return true
	}, true
}

// kill closes the connections that match, and returns how many. This
// connection, if it matches, closes once its replies are sent.
func (c *conn) kill(match func(*conn) bool) int {
	n := 0
	for _, o := range c.srv.clients() {
		if !match(o) {
			continue
		}
		n++
		if o == c {
			c.quit = true
			continue
		}
		o.info.killOnce.Do(func() { close(o.info.killed) })
		o.nc.Close()
	}
	return n
}

// pause is the state of CLIENT PAUSE. Server.paused is set while a pause
// may be in force, so that exec checks only that flag per command.
type pause struct {
	mu   sync.Mutex
	end  time.Time
	all  bool          // every command waits; else only writes
	wake chan struct{} // closed by CLIENT UNPAUSE
}

// clientPause is CLIENT PAUSE timeout [WRITE|ALL]. A pause already in
// force is extended, never shortened, and stays ALL if it was.
func (c *conn) clientPause(args [][]byte) {
	ms, ok := intArg(args[2])
	if !ok || ms < 0 {
		c.err("ERR timeout is not an integer or out of range")
		return
	}
	all := true
	switch {
	case len(args) == 3:
	case len(args) == 4 && strings.EqualFold(string(args[3]), "write"):
		all = false
	case len(args) == 4 && strings.EqualFold(string(args[3]), "all"):
	default:
		c.err("ERR CLIENT PAUSE mode must be WRITE or ALL")
		return
	}
	p := &c.srv.pause
	p.mu.Lock()
	end := time.Now().Add(time.Duration(ms) * time.Millisecond)
	if !c.srv.paused.Load() || time.Now().After(p.end) {
		p.end, p.all = end, all
	} else {
		p.end, p.all = maxTime(p.end, end), p.all || all
	}
	if p.wake == nil {
		p.wake = make(chan struct{})
	}
	c.srv.paused.Store(true)
	p.mu.Unlock()
	c.ok()
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (c *conn) clientUnpause([][]byte) {
	p := &c.srv.pause
	p.mu.Lock()
	if c.srv.paused.Load() {
		c.srv.paused.Store(false)
		close(p.wake)
		p.wake = nil
	}
	p.mu.Unlock()
	c.ok()
}

// waitPause returns once no CLIENT PAUSE holds cmd, the connection is
// killed, or the server shuts down. The replies before cmd's are sent
// first; the writes executed before it stay in the batch until it runs.
func (c *conn) waitPause(cmd *command) {
	p := &c.srv.pause
	for flushed := false; ; flushed = true {
		p.mu.Lock()
		now := time.Now()
		if !c.srv.paused.Load() || !now.Before(p.end) {
			if c.srv.paused.Load() {
				c.srv.paused.Store(false)
				close(p.wake)
				p.wake = nil
			}
			p.mu.Unlock()
			return
		}
		if !p.all && !cmd.write && (cmd.name != "exec" || !c.tx.writes) {
			p.mu.Unlock()
			return
		}
		wake, left := p.wake, p.end.Sub(now)
		p.mu.Unlock()
		if !flushed {
			c.flush()
		}
		t := time.NewTimer(left)
		select {
		case <-wake:
		case <-t.C:
		case <-c.info.killed:
		case <-c.srv.stopping:
		}
		t.Stop()
		if c.srv.closing.Load() || c.isKilled() {
			return
		}
	}
}

func (c *conn) isKilled() bool {
	select {
	case <-c.info.killed:
		return true
	default:
		return false
	}
}

// clientReply is CLIENT REPLY ON|OFF|SKIP. OFF and SKIP get no reply
// themselves (see execMuted).
func (c *conn) clientReply(args [][]byte) {
	switch strings.ToLower(string(args[2])) {
	case "on":
		c.replyOff = false
		c.ok()
	case "off":
		c.replyOff = true
	case "skip":
		if !c.replyOff {
			c.skipNext = true
		}
	default:
		c.errSyntax()
	}
}

// clientNoEvict is CLIENT NO-EVICT ON|OFF. Flint evicts no client for
// memory, so the flag is only shown, as e in CLIENT LIST's flags.
func (c *conn) clientNoEvict(args [][]byte) {
	switch strings.ToLower(string(args[2])) {
	case "on":
		c.info.noEvict.Store(true)
	case "off":
		c.info.noEvict.Store(false)
	default:
		c.errSyntax()
		return
	}
	c.ok()
}

func (c *conn) clientHelp([][]byte) {
	c.help("CLIENT",
		"GETNAME", "Return the name of the current connection.",
		"ID", "Return the ID of the current connection.",
		"INFO", "Return information about the current client connection.",
		"KILL <ip:port>", "Kill connection made from <ip:port>.",
		"KILL <option> <value> [<option> <value> [...]]", strings.Join([]string{
			"Kill connections. Options are:",
			"* ADDR (<ip:port>|<unixsocket>:0)",
			"  Kill connections made from the specified address",
			"* LADDR (<ip:port>|<unixsocket>:0)",
			"  Kill connections made to specified local address",
			"* TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
			"  Kill connections by type.",
			"* USER <username>",
			"  Kill connections authenticated by <username>.",
			"* SKIPME (YES|NO)",
			"  Skip killing current connection (default: yes).",
			"* ID <client-id>",
			"  Kill connections by client id."}, "\n"),
		"LIST [options ...]", strings.Join([]string{
			"Return information about client connections. Options:",
			"* TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
			"  Return clients of specified type.",
			"* ID <client-id> [<client-id> ...]",
			"  Return clients with the given ids."}, "\n"),
		"UNPAUSE", "Stop the current client pause, resuming traffic.",
		"PAUSE <timeout> [WRITE|ALL]", "Suspend all, or just write, clients for <timeout> milliseconds.",
		"REPLY (ON|OFF|SKIP)", "Control the replies sent to the current connection.",
		"SETINFO <option> <value>", "Set client meta attr. Options are: LIB-NAME, LIB-VER.",
		"SETNAME <name>", "Assign the name <name> to the current connection.",
		"NO-EVICT (ON|OFF)", "Protect current client connection from eviction.")
}

// publishInfo makes what CLIENT LIST shows of the connection current:
// fields its goroutine owns, published for other connections to read.
func (c *conn) publishInfo() {
	c.info.cmd.Store(c.lastCmd)
	c.info.qbuf.Store(int64(c.inLen))
	c.info.rbs.Store(int64(len(c.in)))
	c.info.obuf.Store(int64(cap(c.out)))
	c.info.resp.Store(int32(c.proto))
	c.info.readonly.Store(c.readonly)
	for k := range c.info.subs {
		c.info.subs[k].Store(int32(len(c.subs[k])))
	}
	multi := -1
	if c.tx.on {
		multi = len(c.tx.cmds)
	}
	c.info.multi.Store(int32(multi))
}

// describe renders the connection as one line of CLIENT LIST, with
// Redis 7.2's fields in its order. It may be called from any goroutine.
// Flint has no ACL users: user is always default.
func (c *conn) describe(now time.Time) string {
	idle := now.Sub(time.Unix(0, c.info.active.Load()))
	subs := [kinds]int32{c.info.subs[channels].Load(), c.info.subs[patterns].Load(), c.info.subs[shards].Load()}
	multi := c.info.multi.Load()
	flags := ""
	if subs != [kinds]int32{} {
		flags += "P"
	}
	if multi >= 0 {
		flags += "x"
	}
	if c.isKilled() {
		flags += "A" // closing: killed, and not yet gone
	}
	if c.info.readonly.Load() {
		flags += "r"
	}
	if c.info.noEvict.Load() {
		flags += "e"
	}
	if flags == "" {
		flags = "N"
	}
	cmd := "NULL"
	if p := c.info.cmd.Load(); p != nil {
		cmd = p.name
	}
	qbuf, rbs, obuf, omem := c.info.qbuf.Load(), c.info.rbs.Load(), c.info.obuf.Load(), int64(c.output.backlog())
	events := "r"
	if omem > 0 {
		events = "rw"
	}
	return fmt.Sprintf("id=%d addr=%s laddr=%s fd=%d name=%s age=%d idle=%d flags=%s db=0 sub=%d psub=%d ssub=%d multi=%d "+
		"qbuf=%d qbuf-free=%d argv-mem=0 multi-mem=0 rbs=%d rbp=%d obl=0 oll=0 omem=%d tot-mem=%d events=%s cmd=%s "+
		"user=default redir=-1 resp=%d lib-name=%s lib-ver=%s\n",
		c.id, c.nc.RemoteAddr(), c.nc.LocalAddr(), c.info.fd, load(&c.info.name),
		int64(now.Sub(c.info.created).Seconds()), int64(idle.Seconds()), flags, subs[channels], subs[patterns], subs[shards], multi,
		qbuf, rbs-qbuf, rbs, rbs, omem, rbs+obuf+omem, events, cmd,
		c.info.resp.Load(), load(&c.info.libName), load(&c.info.libVer))
}

// fdOf returns the connection's file descriptor, or -1.
func fdOf(c *conn) int {
	fd := -1
	if rc := rawConnOf(c.nc); rc != nil {
		rc.Control(func(d uintptr) { fd = int(d) })
	}
	return fd
}
