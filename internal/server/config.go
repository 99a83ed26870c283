package server

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flintkv/flint/internal/protocol"
)

// timeCmd is TIME: this server's clock, as Redis gives it, seconds and
// microseconds since the Unix epoch, as two bulk strings.
func (c *conn) timeCmd([][]byte) {
	now := time.Now()
	c.out = protocol.AppendArray(c.out, 2)
	c.bulkString(strconv.FormatInt(now.Unix(), 10))
	c.bulkString(strconv.Itoa(now.Nanosecond() / 1000))
}

// configCommands are CONFIG's subcommands. The parameters are those of
// Redis that Flint's settings map onto (configParams); most are flags of
// flint serve, which CONFIG GET shows and CONFIG SET refuses as Redis
// refuses an immutable one. CONFIG SET changes those that can change
// safely while the server runs.
var configCommands = []*command{
	{name: "config|get", arity: -3, flags: "admin noscript loading stale", run: (*conn).configGet,
		doc: commandDoc{summary: "Returns the effective values of configuration parameters.", since: "2.0.0", complexity: "O(N) when N is the number of configuration parameters provided"}},
	{name: "config|set", arity: -4, flags: "admin noscript loading stale", run: (*conn).configSet,
		doc: commandDoc{summary: "Sets configuration parameters in-flight.", since: "2.0.0", complexity: "O(N) when N is the number of configuration parameters provided"}},
	{name: "config|resetstat", arity: 2, flags: "admin noscript loading stale", run: (*conn).configResetStat,
		doc: commandDoc{summary: "Resets the server's statistics.", since: "2.0.0", complexity: "O(1)"}},
	{name: "config|help", arity: 2, flags: "loading stale", run: (*conn).configHelp,
		doc: commandDoc{summary: "Returns helpful text about the different subcommands.", since: "5.0.0", complexity: "O(1)"}},
}

// configGet is CONFIG GET pattern [pattern ...]: the parameters whose
// names match a pattern (Redis's glob patterns, case-insensitive), as a
// flat array of name and value, as Redis 7 gives them.
func (c *conn) configGet(args [][]byte) {
	params := c.configParams()
	names := make([]string, 0, len(params))
	for name := range params {
		for _, p := range args[2:] {
			if ok, _ := path.Match(strings.ToLower(string(p)), name); ok {
				names = append(names, name)
				break
			}
		}
	}
	slices.Sort(names)
	c.out = protocol.AppendMap(c.out, len(names), c.proto)
	for _, name := range names {
		c.bulkString(name)
		c.bulkString(params[name].get(c.srv))
	}
}

// A configParam is one parameter of CONFIG. set, nil for a parameter that
// cannot change at runtime, checks a value and returns the change to make,
// or an error in Redis's words.
type configParam struct {
	get func(s *Server) string
	set func(val string) (apply func(s *Server), err string)
}

// configParams are the parameters CONFIG knows: those clients and tools
// read (redis-benchmark reads save and appendonly), as Flint's settings
// map onto them.
func (c *conn) configParams() map[string]configParam {
	cfg := c.srv.cfg
	fixed := func(v string) configParam { return configParam{get: func(*Server) string { return v }} }
	durable, fsync := "no", "no"
	if p, ok := c.srv.kv.(PersistenceInfo); ok {
		durable = "yes" // every write is in the log before it is acknowledged
		if slices.Contains(p.PersistenceInfo(), "fsync_policy:always") {
			fsync = "always"
		}
	}
	return map[string]configParam{
		"appendonly":                fixed(durable),
		"appendfsync":               fixed(fsync),
		"save":                      fixed(""), // snapshots are taken by log size, not Redis's schedule
		"databases":                 fixed("1"),
		"maxmemory":                 fixed("0"),
		"maxmemory-policy":          fixed("noeviction"),
		"proto-max-bulk-len":        fixed(strconv.Itoa(cfg.MaxBulk)), // the store's value limit too
		"client-query-buffer-limit": fixed(strconv.Itoa(cfg.MaxQueryBuffer)),
		"cluster-enabled":           fixed(map[bool]string{false: "no", true: "yes"}[c.srv.cluster != nil]),
		"port":                      fixed(port(c.srv)),
		"latency-monitor-threshold": fixed("0"), // Flint has no latency monitor (see LATENCY)
		"maxclients": intParam(1, math.MaxUint32, func(s *Server) int64 { return s.maxClients.Load() },
			func(s *Server, n int64) { s.maxClients.Store(n) }),
		"timeout": intParam(0, math.MaxInt32, func(s *Server) int64 { return s.idleTimeout.Load() / int64(time.Second) },
			func(s *Server, n int64) { s.idleTimeout.Store(n * int64(time.Second)) }),
		"slowlog-log-slower-than": intParam(math.MinInt64, math.MaxInt64, func(s *Server) int64 { return s.slowlog.threshold.Load() },
			func(s *Server, n int64) { s.slowlog.threshold.Store(n) }),
		"slowlog-max-len": intParam(0, math.MaxInt64, func(s *Server) int64 { return s.slowlog.maxLen.Load() },
			func(s *Server, n int64) { s.slowlog.setMaxLen(n) }),
		"requirepass": {get: func(s *Server) string {
			if p := s.pass.Load(); p != nil {
				return p.plain
			}
			return ""
		}, set: func(v string) (func(*Server), string) { return func(s *Server) { s.setPass(v) }, "" }},
	}
}

// intParam is an integer parameter, between lo and hi inclusive.
func intParam(lo, hi int64, get func(*Server) int64, set func(*Server, int64)) configParam {
	return configParam{
		get: func(s *Server) string { return strconv.FormatInt(get(s), 10) },
		set: func(v string) (func(*Server), string) {
			n, err := strconv.ParseInt(v, 10, 64)
			switch {
			case err != nil:
				return nil, "argument couldn't be parsed into an integer"
			case n < lo || n > hi:
				return nil, fmt.Sprintf("argument must be between %d and %d inclusive", lo, hi)
			}
			return func(s *Server) { set(s, n) }, ""
		},
	}
}

// configSet is CONFIG SET parameter value [parameter value ...]: every
// change is checked before any is made, so that all are made or none.
func (c *conn) configSet(args [][]byte) {
	if len(args)%2 != 0 {
		c.errSyntax()
		return
	}
	params := c.configParams()
	var changes []func(*Server)
	for i := 2; i < len(args); i += 2 {
		name := strings.ToLower(string(args[i]))
		p, ok := params[name]
		if !ok {
			c.err(fmt.Sprintf("ERR Unknown option or number of arguments for CONFIG SET - '%s'", truncate(args[i])))
			return
		}
		if p.set == nil {
			c.err(fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - can't set immutable config", name))
			return
		}
		apply, msg := p.set(string(args[i+1]))
		if msg != "" {
			c.err(fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - %s", name, msg))
			return
		}
		changes = append(changes, apply)
	}
	for _, apply := range changes {
		apply(c.srv)
	}
	c.ok()
}

// configResetStat is CONFIG RESETSTAT.
func (c *conn) configResetStat([][]byte) {
	c.srv.resetStats()
	c.ok()
}

func (c *conn) configHelp([][]byte) {
	c.help("CONFIG",
		"GET <pattern>", "Return parameters matching the glob-like <pattern> and their values.",
		"SET <directive> <value>", "Set the configuration <directive> to <value>.",
		"RESETSTAT", "Reset statistics reported by the INFO command.")
}

// help replies to <name> HELP as Redis does: a line naming the command's
// form, then each subcommand's usage and its description, indented, one
// simple string per line, then HELP's own.
func (c *conn) help(name string, subs ...string) {
	subs = append(subs, "HELP", "Prints this help.")
	var lines []string
	for i, s := range subs {
		for _, l := range strings.Split(s, "\n") {
			if i%2 == 1 {
				l = "    " + l
			}
			lines = append(lines, l)
		}
	}
	c.out = protocol.AppendArray(c.out, 1+len(lines))
	c.out = protocol.AppendSimple(c.out, name+" <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
	for _, l := range lines {
		c.out = protocol.AppendSimple(c.out, l)
	}
}
