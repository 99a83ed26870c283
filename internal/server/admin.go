package server

import (
	"strings"

	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/store"
)

// adminCommands describe and manage the server.
var adminCommands = []*command{
	{name: "dbsize", arity: 1, flags: "readonly fast", run: (*conn).dbsize},
	{name: "time", arity: 1, flags: "loading stale fast", run: (*conn).timeCmd},
	{name: "config", arity: -2, flags: "", subs: configCommands},
	{name: "flushdb", arity: -1, flags: "write", run: (*conn).flushdb},
	{name: "flushall", arity: -1, flags: "write", run: (*conn).flushdb},
	{name: "save", arity: 1, flags: "admin noscript", run: (*conn).save},
	{name: "bgsave", arity: -1, flags: "admin noscript", run: (*conn).bgsave},
	{name: "cluster", arity: -2, flags: "loading stale", run: (*conn).clusterCmd},
	{name: "role", arity: 1, flags: "loading stale fast", run: (*conn).roleCmd},
	{name: "flint.session", arity: 1, flags: "write", run: (*conn).sessionCmd},
	{name: "flint.member", arity: -3, flags: "admin", run: (*conn).memberCmd},
	{name: "flint.map", arity: -1, flags: "loading stale", run: (*conn).mapCmd},
	{name: "flint.mapset", arity: 2, flags: "admin write", run: (*conn).mapSetCmd},
	{name: "flint.slots", arity: -2, flags: "admin write", run: (*conn).slotsCmd},
	{name: "flint.seq", arity: -5, flags: "write", first: 5, last: 5, step: 1, run: (*conn).seqCmd},
	{name: "readonly", arity: 1, flags: "loading stale fast", run: (*conn).readonlyCmd},
	{name: "asking", arity: 1, flags: "fast", run: (*conn).askingCmd},
	{name: "readwrite", arity: 1, flags: "loading stale fast", run: (*conn).readwriteCmd},
}

// Snapshotter is implemented by a Backend that can write a snapshot of its
// state to disk on demand.
type Snapshotter interface {
	// Snapshot writes a snapshot of everything applied and returns once it
	// is durable.
	Snapshot() error
	// BackgroundSnapshot starts writing a snapshot of everything applied
	// and returns at once, true if it started one: none starts while
	// another is being written.
	BackgroundSnapshot() (bool, error)
}

// noSaveErr is the error of SAVE and BGSAVE for a Backend that is not a
// Snapshotter: one that keeps nothing on disk, or one whose snapshots are
// taken on their own schedule (a group hosted with others on a node).
func (s *Server) noSaveErr() string {
	if _, durable := s.kv.(PersistenceInfo); durable {
		return "ERR this server takes its snapshots on its own schedule: SAVE and BGSAVE are not supported"
	}
	return "ERR this server keeps no data on disk"
}

// save is SAVE: write a snapshot now and reply once it is on disk.
func (c *conn) save([][]byte) {
	sn, ok := c.srv.kv.(Snapshotter)
	if !ok {
		c.err(c.srv.noSaveErr())
		return
	}
	if err := sn.Snapshot(); err != nil {
		c.err("ERR snapshot failed: " + err.Error())
		return
	}
	c.ok()
}

// bgsave is BGSAVE [SCHEDULE]: start a snapshot and reply at once; INFO
// persistence reports how it went. As in Redis, a BGSAVE while a snapshot
// is being written is an error, with SCHEDULE or without: Redis schedules
// a save only behind another kind of child process (an AOF rewrite), and
// Flint has none.
func (c *conn) bgsave(args [][]byte) {
	sn, ok := c.srv.kv.(Snapshotter)
	switch {
	case len(args) > 2 || (len(args) == 2 && !strings.EqualFold(string(args[1]), "schedule")):
		c.errSyntax()
		return
	case !ok:
		c.err(c.srv.noSaveErr())
		return
	}
	started, err := sn.BackgroundSnapshot()
	switch {
	case err != nil:
		c.err("ERR snapshot failed: " + err.Error())
	case started:
		c.out = protocol.AppendSimple(c.out, "Background saving started")
	default:
		c.err("ERR Background save already in progress")
	}
}

func (c *conn) dbsize([][]byte) {
	if s, ok := c.read(); ok {
		c.int(s.Len())
	}
}

// flushdb is FLUSHDB and FLUSHALL [ASYNC|SYNC]; both run synchronously.
func (c *conn) flushdb(args [][]byte) {
	if len(args) > 2 {
		c.errSyntax()
		return
	}
	if len(args) == 2 && !strings.EqualFold(string(args[1]), "async") && !strings.EqualFold(string(args[1]), "sync") {
		c.errSyntax()
		return
	}
	c.write(store.OpFlush, 0, replyOK)
}
