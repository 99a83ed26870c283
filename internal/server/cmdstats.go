package server

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Command statistics (INFO commandstats and errorstats) and the slow log.
//
// A command's time is the time its connection's goroutine spends running
// it, less the time spent waiting for writes to commit (Backend.Apply),
// for a CLIENT PAUSE to end, or for the client to take its replies. So, as
// in Redis, where the fsync of the log happens outside commands, a write's
// time does not include waiting for the log: only executing it. Writes
// and simple reads are not timed one by one: they share equally the time
// of the batch of input they came in, less that of the other commands
// (see sharesTime); the slow log holds only the commands timed alone.
// Each connection counts its calls in counts (a cmdCount per command),
// which it adds to the server's table once per batch of input
// (publishStats), as it does its other counters, so that connections do
// not contend on them per command.
//
// Memory is bounded: the server's table has one row per command and
// subcommand, errorstats at most maxErrorCodes codes, and the slow log at
// most slowlog-max-len entries of at most slowlogArgs arguments of at most
// slowlogArgLen bytes each.

// cmdStats is the server's row for one command.
type cmdStats struct {
	calls, nanos, rejected, failed atomic.Int64
}

// cmdCount is what one connection counted for one command since its last
// batch was published.
type cmdCount struct {
	cmd                            *command
	calls, nanos, rejected, failed int64
	shared                         int64 // calls that share the batch's time (see shareTime)
}

// count returns the connection's counts for cmd, adding a row for it if
// it has none yet. A batch names few commands, usually the same one again.
func (c *conn) count(cmd *command) *cmdCount {
	if n := len(c.counts); n > 0 && c.counts[n-1].cmd == cmd {
		return &c.counts[n-1]
	}
	for i := range c.counts {
		if c.counts[i].cmd == cmd {
			return &c.counts[i]
		}
	}
	c.counts = append(c.counts, cmdCount{cmd: cmd})
	return &c.counts[len(c.counts)-1]
}

// publishCounts adds the connection's counts to the server's table.
func (c *conn) publishCounts() {
	for i, n := range c.counts {
		row := &c.srv.cmdStats[n.cmd.id]
		row.calls.Add(n.calls)
		row.nanos.Add(n.nanos)
		if n.rejected|n.failed != 0 {
			row.rejected.Add(n.rejected)
			row.failed.Add(n.failed)
		}
		c.counts[i] = cmdCount{}
	}
	c.counts = c.counts[:0]
}

// call runs a command that passed exec's checks, after the CLIENT PAUSE
// that holds it, if any, and counts it.
func (c *conn) call(cmd *command, args [][]byte) {
	if c.srv.paused.Load() {
		waited := time.Now()
		c.waitPause(cmd)
		c.excluded += time.Since(waited).Nanoseconds()
	}
	n := c.count(cmd)
	n.calls++
	if sharesTime(cmd) {
		n.shared++
		if !cmd.write && !cmd.batched {
			c.commit()
		}
		c.running = cmd
		cmd.run(c, args)
		c.running = nil
		return
	}
	start, waited := time.Now(), c.commitNanos
	c.timing = true
	c.commit()
	c.running = cmd
	cmd.run(c, args)
	c.running = nil
	c.timing = false
	wall := time.Since(start).Nanoseconds()
	c.excluded += wall
	d := wall - (c.commitNanos - waited)
	n.nanos += d
	if limit := c.srv.slowlog.threshold.Load(); limit >= 0 && d/1000 >= limit {
		c.srv.slowlog.add(c, d/1000, args)
	}
}

// sharesTime reports whether cmd shares its batch's time with the others
// that do rather than being timed alone: writes, whose execution here is
// adding an entry to the batch, simple reads, a lookup each, and MULTI and
// EXEC, which join the batch too. Timing each would cost more than running
// it: a clock read took 95 ns on the project's 2-core VM, and a pipelined
// GET about 1 µs of server CPU.
func sharesTime(cmd *command) bool { return cmd.write || cmd.reply != nil || cmd.batched }

// shareTime shares the time of the batch of input just executed, wall
// nanoseconds, less what it excluded (commits, commands timed alone,
// waits for the client or a pause), among the writes and simple reads it
// executed, equally.
func (c *conn) shareTime(wall int64) {
	var calls int64
	for _, n := range c.counts {
		calls += n.shared
	}
	if rest := wall - c.excluded; calls > 0 && rest > 0 {
		each := rest / calls
		for i := range c.counts {
			c.counts[i].nanos += c.counts[i].shared * each
			c.counts[i].shared = 0
		}
	}
	c.excluded = 0
}

// execMuted executes a command under CLIENT REPLY OFF or SKIP: its reply,
// whatever it is, is dropped, but for that of CLIENT REPLY ON, which turns
// replies back on.
func (c *conn) execMuted(args [][]byte) {
	off := c.replyOff
	c.skipNext = false
	c.commit()
	c.flush() // the replies before this command's are sent
	c.muted = true
	c.dispatch(args)
	c.commit()
	c.muted = false
	if !off || c.replyOff {
		c.out = c.out[:0]
	}
}

// failed counts an error reply to the command running, if any, as a
// failed call, and the error's code in errorstats.
func (c *conn) failed(msg string) {
	if c.running != nil {
		c.count(c.running).failed++
	}
	c.srv.errors.add(msg)
}

// maxErrorCodes bounds the error codes errorstats counts, as Redis's
// (ERRORSTATS_LIMIT): errors of other codes are counted only in
// total_error_replies.
const maxErrorCodes = 128

// errorStats counts error replies by code, the first word of the error.
type errorStats struct {
	total atomic.Int64
	mu    struct {
		sync.Mutex
		codes map[string]int64
	}
}

func (e *errorStats) add(msg string) {
	e.total.Add(1)
	code, _, _ := strings.Cut(msg, " ")
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.codes == nil {
		e.mu.codes = make(map[string]int64)
	}
	if _, ok := e.mu.codes[code]; ok || len(e.mu.codes) < maxErrorCodes {
		e.mu.codes[code]++
	}
}

func (e *errorStats) reset() {
	e.total.Store(0)
	e.mu.Lock()
	e.mu.codes = nil
	e.mu.Unlock()
}

// resetStats is CONFIG RESETSTAT: it zeroes the counters of INFO stats,
// commandstats and errorstats. Counts that connections have not
// published yet are added after.
func (s *Server) resetStats() {
	for i := range s.cmdStats {
		row := &s.cmdStats[i]
		row.calls.Store(0)
		row.nanos.Store(0)
		row.rejected.Store(0)
		row.failed.Store(0)
	}
	s.errors.reset()
	st := &s.stats
	for _, n := range []*atomic.Int64{&st.connections, &st.rejected, &st.commands, &st.hits, &st.misses, &st.netIn, &st.netOut} {
		n.Store(0)
	}
}

// infoCommandstats is INFO's commandstats section, in the order of
// command names: the commands called or rejected since start.
func (c *conn) infoCommandstats(b *strings.Builder) {
	for _, cmd := range allCommandsByName() {
		row := &c.srv.cmdStats[cmd.id]
		calls, rejected, failed := row.calls.Load(), row.rejected.Load(), row.failed.Load()
		if calls == 0 && rejected == 0 && failed == 0 {
			continue
		}
		usec := row.nanos.Load() / 1000
		perCall := 0.0
		if calls > 0 {
			perCall = float64(usec) / float64(calls)
		}
		fmt.Fprintf(b, "cmdstat_%s:calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d\r\n",
			cmd.name, calls, usec, perCall, rejected, failed)
	}
}

// infoErrorstats is INFO's errorstats section.
func (c *conn) infoErrorstats(b *strings.Builder) {
	e := &c.srv.errors
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, code := range sortedKeys(e.mu.codes) {
		fmt.Fprintf(b, "errorstat_%s:count=%d\r\n", code, e.mu.codes[code])
	}
}
