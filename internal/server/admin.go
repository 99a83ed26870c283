package server

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"time"

	"github.com/flintkv/flint/internal/hugepage"
	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/store"
)

// adminCommands describe and manage the server.
var adminCommands = []*command{
	{name: "command", arity: -1, flags: "loading stale", run: (*conn).commandCmd},
	{name: "info", arity: -1, flags: "loading stale", run: (*conn).infoCmd},
	{name: "dbsize", arity: 1, flags: "readonly fast", run: (*conn).dbsize},
	{name: "time", arity: 1, flags: "loading stale fast", run: (*conn).timeCmd},
	{name: "config", arity: -2, flags: "admin loading stale", run: (*conn).configCmd},
	{name: "flushdb", arity: -1, flags: "write", run: (*conn).flushdb},
	{name: "flushall", arity: -1, flags: "write", run: (*conn).flushdb},
	{name: "save", arity: 1, flags: "admin noscript", run: (*conn).save},
	{name: "bgsave", arity: -1, flags: "admin noscript", run: (*conn).bgsave},
	{name: "cluster", arity: -2, flags: "loading stale", run: (*conn).clusterCmd},
	{name: "role", arity: 1, flags: "loading stale fast", run: (*conn).roleCmd},
	{name: "flint.session", arity: 1, flags: "write", run: (*conn).sessionCmd},
	{name: "flint.member", arity: -3, flags: "admin", run: (*conn).memberCmd},
	{name: "flint.map", arity: 1, flags: "loading stale", run: (*conn).mapCmd},
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

// save is SAVE: write a snapshot now and reply once it is on disk.
func (c *conn) save([][]byte) {
	sn, ok := c.srv.kv.(Snapshotter)
	if !ok {
		c.err("ERR this server keeps no data on disk")
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
		c.err("ERR this server keeps no data on disk")
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

// commandCmd is COMMAND, COMMAND COUNT, COMMAND INFO [name ...] and
// COMMAND DOCS [name ...] (docs are empty: enough for redis-cli).
func (c *conn) commandCmd(args [][]byte) {
	if len(args) == 1 {
		c.commandInfo(sortedCommands())
		return
	}
	switch sub := strings.ToLower(string(args[1])); sub {
	case "count":
		if len(args) != 2 {
			c.err("ERR wrong number of arguments for 'command|count' command")
			return
		}
		c.int(int64(len(commands)))
	case "info", "docs":
		list := sortedCommands()
		if len(args) > 2 {
			list = list[:0]
			for _, a := range args[2:] {
				list = append(list, commands[strings.ToLower(string(a))]) // nil if unknown
			}
		}
		if sub == "info" {
			c.commandInfo(list)
			return
		}
		c.out = protocol.AppendMap(c.out, 0, c.proto)
	case "help":
		c.help("COMMAND",
			"(no subcommand)", "Return details about all Flint commands.",
			"COUNT", "Return the total number of commands in this Flint server.",
			"DOCS [<command-name> ...]", "Return documentation details about multiple Flint commands (none yet: an empty map).",
			"INFO [<command-name> ...]", "Return details about multiple Flint commands. If no command names are given, documentation details for all commands are returned.")
	default:
		c.err(fmt.Sprintf("ERR unknown subcommand '%s'. Try COMMAND HELP.", truncate(args[1])))
	}
}

func sortedCommands() []*command {
	list := make([]*command, 0, len(commands))
	for _, cmd := range commands {
		list = append(list, cmd)
	}
	slices.SortFunc(list, func(a, b *command) int { return strings.Compare(a.name, b.name) })
	return list
}

// commandInfo writes Redis 7's ten-element description of each command;
// a nil entry is written as a null bulk string for an unknown name, as
// Redis does.
func (c *conn) commandInfo(list []*command) {
	c.out = protocol.AppendArray(c.out, len(list))
	for _, cmd := range list {
		if cmd == nil {
			c.null()
			continue
		}
		c.out = protocol.AppendArray(c.out, 10)
		c.bulkString(cmd.name)
		c.int(int64(cmd.arity))
		flags := strings.Fields(cmd.flags)
		c.out = protocol.AppendSet(c.out, len(flags), c.proto)
		for _, f := range flags {
			c.out = protocol.AppendSimple(c.out, f)
		}
		c.int(int64(cmd.first))
		c.int(int64(cmd.last))
		c.int(int64(cmd.step))
		for range 4 { // ACL categories, tips, key specs, subcommands
			c.out = protocol.AppendArray(c.out, 0)
		}
	}
}

// infoSections are the sections of INFO, in order.
var infoSections = []struct {
	name  string
	write func(c *conn, b *strings.Builder)
}{
	{"server", (*conn).infoServer},
	{"clients", (*conn).infoClients},
	{"memory", (*conn).infoMemory},
	{"persistence", (*conn).infoPersistence},
	{"replication", (*conn).infoReplication},
	{"stats", (*conn).infoStats},
	{"cluster", (*conn).infoCluster},
	{"keyspace", (*conn).infoKeyspace},
}

// infoCmd is INFO [section ...]; "all", "default" and "everything" name every section.
func (c *conn) infoCmd(args [][]byte) {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := len(want) == 0 || want["all"] || want["default"] || want["everything"]
	var b strings.Builder
	for _, sec := range infoSections {
		if all || want[sec.name] {
			if b.Len() > 0 {
				b.WriteString("\r\n")
			}
			fmt.Fprintf(&b, "# %s%s\r\n", strings.ToUpper(sec.name[:1]), sec.name[1:])
			sec.write(c, &b)
		}
	}
	c.out = protocol.AppendVerbatim(c.out, b.String(), c.proto)
}

func (c *conn) infoServer(b *strings.Builder) {
	s := c.srv
	up := time.Since(s.start)
	mode, _ := c.mode()
	fmt.Fprintf(b, "redis_version:%s\r\nflint_version:%s\r\nredis_mode:%s\r\nos:%s %s\r\n"+
		"arch_bits:64\r\ngo_version:%s\r\ngo_max_procs:%d\r\nprocess_id:%d\r\ntcp_port:%s\r\nuptime_in_seconds:%d\r\nuptime_in_days:%d\r\n",
		redisVersion, Version, mode, runtime.GOOS, runtime.GOARCH, runtime.Version(), runtime.GOMAXPROCS(0), os.Getpid(),
		port(s), int64(up.Seconds()), int64(up.Hours()/24))
}

// Version is Flint's version.
const Version = "0.1.0"

func port(s *Server) string {
	if a := s.Addr(); a != nil {
		if i := strings.LastIndexByte(a.String(), ':'); i >= 0 {
			return a.String()[i+1:]
		}
	}
	return ""
}

func (c *conn) infoClients(b *strings.Builder) {
	s := c.srv
	s.mu.Lock()
	n := len(s.mu.conns)
	s.mu.Unlock()
	fmt.Fprintf(b, "connected_clients:%d\r\nmaxclients:%d\r\n", n, s.cfg.MaxClients)
}

// memoryMetrics are the runtime metrics INFO memory reports, in the order
// infoMemory reads them: the heap's objects (MemStats.HeapAlloc), the rest
// of its spans in use (with the objects, MemStats.HeapInuse), all memory
// mapped (MemStats.Sys), and completed collections (MemStats.NumGC).
// runtime.ReadMemStats would stop the world, and so wait for the log's
// fsync in flight (see vfs.SyncHeld); reading these does not.
var memoryMetrics = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/total:bytes",
	"/gc/cycles/total:gc-cycles",
}

func (c *conn) infoMemory(b *strings.Builder) {
	m := make([]metrics.Sample, len(memoryMetrics))
	for i, name := range memoryMetrics {
		m[i].Name = name
	}
	metrics.Read(m)
	objects, unused, total, cycles := sampleUint(m[0]), sampleUint(m[1]), sampleUint(m[2]), sampleUint(m[3])
	st := c.srv.kv.Store()
	huge, _ := hugepage.Resident() // 0 where /proc cannot tell
	fmt.Fprintf(b, "used_memory:%d\r\nused_memory_heap:%d\r\nused_memory_sys:%d\r\ndataset_bytes:%d\r\n"+
		"huge_pages_bytes:%d\r\ngc_cycles:%d\r\nmaxmemory:0\r\n",
		objects, objects+unused, total, st.Bytes(), huge, cycles)
}

// sampleUint returns s's value, or 0 if this Go does not have the metric.
func sampleUint(s metrics.Sample) uint64 {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s.Value.Uint64()
}

// PersistenceInfo is implemented by a Backend that keeps data on disk: it
// returns INFO's persistence section as name:value lines.
type PersistenceInfo interface {
	PersistenceInfo() []string
}

func (c *conn) infoPersistence(b *strings.Builder) {
	p, ok := c.srv.kv.(PersistenceInfo)
	if !ok {
		b.WriteString("durable:0\r\n")
		return
	}
	b.WriteString("durable:1\r\n")
	for _, line := range p.PersistenceInfo() {
		b.WriteString(line)
		b.WriteString("\r\n")
	}
}

func (c *conn) infoStats(b *strings.Builder) {
	st := &c.srv.stats
	fmt.Fprintf(b, "total_connections_received:%d\r\ntotal_commands_processed:%d\r\nrejected_connections:%d\r\n"+
		"keyspace_hits:%d\r\nkeyspace_misses:%d\r\ntotal_net_input_bytes:%d\r\ntotal_net_output_bytes:%d\r\n",
		st.connections.Load(), st.commands.Load(), st.rejected.Load(),
		st.hits.Load(), st.misses.Load(), st.netIn.Load(), st.netOut.Load())
}

func (c *conn) infoKeyspace(b *strings.Builder) {
	if s := c.srv.kv.Store(); s.Len() > 0 {
		fmt.Fprintf(b, "db0:keys=%d,expires=%d,avg_ttl=0\r\n", s.Len(), s.Expires())
	}
}
