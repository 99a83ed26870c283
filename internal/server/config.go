package server

import (
	"fmt"
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

// configCmd is CONFIG GET pattern [pattern ...]: the parameters whose
// names match a pattern (Redis's glob patterns, case-insensitive), as a
// flat array of name and value, as Redis 7 gives them. Flint's settings
// are flags of flint serve, so CONFIG SET, RESETSTAT and REWRITE are
// refused, saying so; other subcommands get Redis's reply to one it does
// not know.
func (c *conn) configCmd(args [][]byte) {
	switch strings.ToLower(string(args[1])) {
	case "help":
		c.help("CONFIG", "GET <pattern>", "Return parameters matching the glob-like <pattern> and their values.")
		return
	case "get":
	case "set", "resetstat", "rewrite":
		c.err(fmt.Sprintf("ERR unknown subcommand '%s'. Flint answers CONFIG GET only: its settings are flint serve's flags.", truncate(args[1])))
		return
	default:
		c.err(fmt.Sprintf("ERR unknown subcommand '%s'. Try CONFIG HELP.", truncate(args[1])))
		return
	}
	if len(args) < 3 {
		c.errArity("config|get")
		return
	}
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
		c.bulkString(params[name])
	}
}

// configParams are the parameters CONFIG GET knows, with their values:
// those clients and tools read (redis-benchmark reads save and
// appendonly), as Flint's settings map onto them.
func (c *conn) configParams() map[string]string {
	cfg := c.srv.cfg
	return map[string]string{
		"appendonly":                "yes", // every write is in the log before it is acknowledged
		"appendfsync":               "always",
		"save":                      "", // snapshots are taken by log size, not Redis's schedule
		"databases":                 "1",
		"maxclients":                strconv.Itoa(cfg.MaxClients),
		"maxmemory":                 "0",
		"maxmemory-policy":          "noeviction",
		"proto-max-bulk-len":        strconv.Itoa(cfg.MaxBulk),
		"client-query-buffer-limit": strconv.Itoa(cfg.MaxQueryBuffer),
		"timeout":                   strconv.Itoa(int(cfg.IdleTimeout / time.Second)),
		"cluster-enabled":           map[bool]string{false: "no", true: "yes"}[c.srv.cluster != nil],
		"port":                      port(c.srv),
	}
}

// help replies to <name> HELP as Redis does: a line naming the command's
// form, then each subcommand's usage and an indented description, then
// HELP's own, as simple strings.
func (c *conn) help(name string, subs ...string) {
	subs = append(subs, "HELP", "Print this help.")
	c.out = protocol.AppendArray(c.out, 1+len(subs))
	c.out = protocol.AppendSimple(c.out, name+" <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
	for i, s := range subs {
		if i%2 == 1 {
			s = "    " + s
		}
		c.out = protocol.AppendSimple(c.out, s)
	}
}
