package server

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flintkv/flint/internal/protocol"
)

// The slow log keeps the latest commands that ran for at least
// slowlog-log-slower-than microseconds (a negative value turns it off, 0
// logs every command), at most slowlog-max-len of them, as Redis's
// SLOWLOG shows them. A command's time is defined in cmdstats.go.
const (
	defaultSlowlogThreshold = 10000 // µs, Redis's default
	defaultSlowlogMaxLen    = 128
	slowlogArgs             = 32  // arguments kept per entry, as Redis (SLOWLOG_ENTRY_MAX_ARGC)
	slowlogArgLen           = 128 // bytes kept per argument (SLOWLOG_ENTRY_MAX_STRING)
)

type slowEntry struct {
	id         int64
	at         int64 // unix seconds
	us         int64
	args       []string
	addr, name string
}

type slowlog struct {
	threshold atomic.Int64 // µs
	maxLen    atomic.Int64
	mu        struct {
		sync.Mutex
		next    int64
		entries []slowEntry // oldest first; len <= maxLen
	}
}

func (l *slowlog) init() {
	l.threshold.Store(defaultSlowlogThreshold)
	l.maxLen.Store(defaultSlowlogMaxLen)
}

// add logs a command of c's that took us microseconds. It copies what it
// keeps of args.
func (l *slowlog) add(c *conn, us int64, args [][]byte) {
	e := slowEntry{at: time.Now().Unix(), us: us, addr: c.nc.RemoteAddr().String(), name: load(&c.info.name)}
	n := min(len(args), slowlogArgs)
	for i, a := range args[:n] {
		switch {
		case i == slowlogArgs-1 && len(args) > slowlogArgs:
			e.args = append(e.args, fmt.Sprintf("... (%d more arguments)", len(args)-slowlogArgs+1))
		case len(a) > slowlogArgLen:
			e.args = append(e.args, fmt.Sprintf("%s... (%d more bytes)", a[:slowlogArgLen], len(a)-slowlogArgLen))
		default:
			e.args = append(e.args, string(a))
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e.id = l.mu.next
	l.mu.next++
	l.mu.entries = append(l.mu.entries, e)
	l.trimLocked()
}

// setMaxLen is CONFIG SET slowlog-max-len.
func (l *slowlog) setMaxLen(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maxLen.Store(n)
	l.trimLocked()
}

// trimLocked drops the oldest entries past maxLen.
func (l *slowlog) trimLocked() {
	if max, n := int(l.maxLen.Load()), len(l.mu.entries); n > max {
		copy(l.mu.entries, l.mu.entries[n-max:])
		clear(l.mu.entries[max:])
		l.mu.entries = l.mu.entries[:max]
	}
}

// slowlogGet is SLOWLOG GET [count]: the newest count entries (10 by
// default, all with -1).
func (c *conn) slowlogGet(args [][]byte) {
	n := int64(10)
	if len(args) == 3 {
		var ok bool
		if n, ok = intArg(args[2]); !ok || n < -1 {
			c.err("ERR count should be greater than or equal to -1")
			return
		}
	}
	l := &c.srv.slowlog
	l.mu.Lock()
	var entries []slowEntry // newest first
	for i := len(l.mu.entries) - 1; i >= 0 && (n < 0 || len(entries) < int(n)); i-- {
		entries = append(entries, l.mu.entries[i])
	}
	l.mu.Unlock()
	c.out = protocol.AppendArray(c.out, len(entries))
	for _, e := range entries {
		c.out = protocol.AppendArray(c.out, 6)
		c.int(e.id)
		c.int(e.at)
		c.int(e.us)
		c.out = protocol.AppendArray(c.out, len(e.args))
		for _, a := range e.args {
			c.bulkString(a)
		}
		c.bulkString(e.addr)
		c.bulkString(e.name)
	}
}

func (c *conn) slowlogLen([][]byte) {
	l := &c.srv.slowlog
	l.mu.Lock()
	n := len(l.mu.entries)
	l.mu.Unlock()
	c.int(int64(n))
}

func (c *conn) slowlogReset([][]byte) {
	l := &c.srv.slowlog
	l.mu.Lock()
	l.mu.entries = nil
	l.mu.Unlock()
	c.ok()
}

func (c *conn) slowlogHelp([][]byte) {
	c.help("SLOWLOG",
		"GET [<count>]", strings.Join([]string{
			"Return top <count> entries from the slowlog (default: 10, -1 mean all).",
			"Entries are made of:",
			"id, timestamp, time in microseconds, arguments array, client IP and port,",
			"client name"}, "\n"),
		"LEN", "Return the length of the slowlog.",
		"RESET", "Reset the slowlog.")
}
