package server

import (
	"strings"
	"time"

	"github.com/flintkv/flint/internal/protocol"
)

// introspectCommands describe the server and its clients.
var introspectCommands = []*command{
	{name: "command", arity: -1, flags: "loading stale", run: (*conn).commandList, subs: commandCommands},
	{name: "info", arity: -1, flags: "loading stale", run: (*conn).infoCmd},
	{name: "lastsave", arity: 1, flags: "loading stale fast", run: (*conn).lastSaveCmd},
	{name: "wait", arity: 3, flags: "", run: (*conn).waitCmd},
	{name: "slowlog", arity: -2, flags: "", subs: slowlogCommands},
	{name: "memory", arity: -2, flags: "", subs: memoryCommands},
	{name: "latency", arity: -2, flags: "", subs: latencyCommands},
}

var slowlogCommands = []*command{
	{name: "slowlog|get", arity: -2, flags: "admin loading stale", run: (*conn).slowlogGet,
		doc: commandDoc{summary: "Returns the slow log's entries.", since: "2.2.12", complexity: "O(N) where N is the number of entries returned",
			tips: "nondeterministic_output"}},
	{name: "slowlog|len", arity: 2, flags: "admin loading stale", run: (*conn).slowlogLen,
		doc: commandDoc{summary: "Returns the number of entries in the slow log.", since: "2.2.12", complexity: "O(1)",
			tips: "nondeterministic_output"}},
	{name: "slowlog|reset", arity: 2, flags: "admin loading stale", run: (*conn).slowlogReset,
		doc: commandDoc{summary: "Clears all entries from the slow log.", since: "2.2.12", complexity: "O(N) where N is the number of entries in the slowlog"}},
	{name: "slowlog|help", arity: 2, flags: "loading stale", run: (*conn).slowlogHelp,
		doc: commandDoc{summary: "Show helpful text about the different subcommands", since: "6.2.0", complexity: "O(1)"}},
}

var memoryCommands = []*command{
	{name: "memory|usage", arity: -3, flags: "readonly", first: 2, last: 2, step: 1, run: (*conn).memoryUsage,
		doc: commandDoc{summary: "Estimates the memory usage of a key.", since: "4.0.0", complexity: "O(1)", keys: "RO"}},
	{name: "memory|help", arity: 2, flags: "loading stale", run: (*conn).memoryHelp,
		doc: commandDoc{summary: "Returns helpful text about the different subcommands.", since: "4.0.0", complexity: "O(1)"}},
}

// latencyCommands are LATENCY's subcommands. Flint has no latency
// monitor: they answer as Redis's do with its monitor off, as it is by
// default (latency-monitor-threshold 0), with no samples.
var latencyCommands = []*command{
	{name: "latency|latest", arity: 2, flags: "admin noscript loading stale", run: (*conn).latencyNone,
		doc: commandDoc{summary: "Returns the latest latency samples for all events.", since: "2.8.13", complexity: "O(1)", tips: "nondeterministic_output"}},
	{name: "latency|history", arity: 3, flags: "admin noscript loading stale", run: (*conn).latencyNone,
		doc: commandDoc{summary: "Returns timestamp-latency samples for an event.", since: "2.8.13", complexity: "O(1)", tips: "nondeterministic_output"}},
	{name: "latency|reset", arity: -2, flags: "admin noscript loading stale", run: func(c *conn, _ [][]byte) { c.int(0) },
		doc: commandDoc{summary: "Resets the latency data for one or more events.", since: "2.8.13", complexity: "O(1)"}},
	{name: "latency|help", arity: 2, flags: "loading stale", run: (*conn).latencyHelp,
		doc: commandDoc{summary: "Returns helpful text about the different subcommands.", since: "2.8.13", complexity: "O(1)"}},
}

// latencyNone replies to LATENCY LATEST and HISTORY: no samples.
func (c *conn) latencyNone([][]byte) { c.out = protocol.AppendArray(c.out, 0) }

func (c *conn) latencyHelp([][]byte) {
	c.help("LATENCY",
		"HISTORY <event>", "Return time-latency samples for the <event> class.",
		"LATEST", "Return the latest latency samples for all events.",
		"RESET [<event> ...]", "Reset latency data of one or more <event> classes.\n(default: reset all data for all event classes)")
}

// LastSaver is implemented by a Backend that writes snapshots.
type LastSaver interface {
	// LastSnapshot returns when the newest snapshot was written, or the
	// zero time if none was since the process started.
	LastSnapshot() time.Time
}

// lastSave returns when the last snapshot was written, or, as Redis, when
// the server started if none was since.
func (s *Server) lastSave() time.Time {
	if l, ok := s.kv.(LastSaver); ok {
		if t := l.LastSnapshot(); !t.IsZero() {
			return t
		}
	}
	return s.start
}

func (c *conn) lastSaveCmd([][]byte) { c.int(c.srv.lastSave().Unix()) }

// keyOverhead is what MEMORY USAGE adds to a key's and its value's bytes:
// an estimate of the store's index entry and the value's header.
const keyOverhead = 48

// memoryUsage is MEMORY USAGE key [SAMPLES count]: an estimate of the
// bytes that key and its value take, or null if the key does not exist.
// Values are strings, so SAMPLES, which Redis uses for nested values, is
// checked and changes nothing.
func (c *conn) memoryUsage(args [][]byte) {
	switch {
	case len(args) == 3:
	case len(args) == 5 && strings.EqualFold(string(args[3]), "samples"):
		if _, ok := intArg(args[4]); !ok {
			c.errNotInt()
			return
		}
	default:
		c.errSyntax()
		return
	}
	v, found, ok := c.getValue(args[2]) // in a transaction, at its place (see txRead)
	switch {
	case !ok:
	case !found:
		c.null()
	default:
		c.int(int64(len(args[2]) + len(v) + keyOverhead))
	}
}

func (c *conn) memoryHelp([][]byte) {
	c.help("MEMORY",
		"USAGE <key> [SAMPLES <count>]", "Return memory in bytes used by <key> and its value.")
}

// Positioner is implemented by a Backend with a log.
type Positioner interface {
	// Applied returns the index of the last entry applied to Store: once
	// Apply returns, at least that of its batch's last entry.
	Applied() uint64
}

// appliedIndex returns the backend's applied index, or 0 without a log.
func (s *Server) appliedIndex() uint64 {
	if s.position == nil {
		return 0
	}
	return s.position.Applied()
}

// committed notes, after a batch of the connection's writes is applied,
// the index WAIT waits for: the applied index then, which is at least
// that of the batch's last write.
func (c *conn) committed() { c.lastWrite = c.srv.appliedIndex() }

// waitPoll is how often WAIT looks at the members' progress.
const waitPoll = 2 * time.Millisecond

// waitCmd is WAIT numreplicas timeout: on the leader of a group, it
// returns once numreplicas other members have in their logs every write
// of this connection (their match index covers the index noted by
// committed), or once timeout milliseconds pass (0: no limit), with the
// number of members that have. A member of no group has no replicas: it
// replies 0 at once, where Redis would wait for the timeout to pass. A
// follower refuses WAIT, as a Redis replica does.
func (c *conn) waitCmd(args [][]byte) {
	want, ok1 := intArg(args[1])
	ms, ok2 := intArg(args[2])
	switch {
	case !ok1:
		c.errNotInt()
		return
	case !ok2:
		c.err("ERR timeout is not an integer or out of range")
		return
	case ms < 0:
		c.err("ERR timeout is negative")
		return
	case c.srv.cluster == nil:
		c.int(0)
		return
	}
	var deadline <-chan time.Time
	if ms > 0 {
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer t.Stop()
		deadline = t.C
	}
	tick := time.NewTicker(waitPoll)
	defer tick.Stop()
	for {
		v := c.srv.cluster.ClusterView()
		if v.Leader != v.Self {
			c.err("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.")
			return
		}
		n := 0
		for _, m := range v.Members {
			if m.ID != v.Self && m.Match >= c.lastWrite {
				n++
			}
		}
		if int64(n) >= want {
			c.int(int64(n))
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			c.int(int64(n))
			return
		case <-c.srv.stopping:
			c.int(int64(n))
			return
		case <-c.info.killed:
			c.int(int64(n))
			return
		}
	}
}
