package server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flintkv/flint/internal/hugepage"
	"github.com/flintkv/flint/internal/protocol"
)

// INFO gives Redis 7's sections, in Redis's order, with the fields of
// Redis's that clients and tools read and that mean something in Flint,
// under Redis's names; fields of Flint's own follow Redis's in their
// section. Values Flint does not have are not made up: a field is left
// out rather than shown as 0, except for the counters of things Flint
// never does (blocked_clients, evicted_keys), which are 0.

// infoSection is one section of INFO. dflt is set for the sections of
// INFO and INFO default; all and everything have every section (Redis's
// everything adds the sections modules make, and Flint has none).
type infoSection struct {
	name  string
	dflt  bool
	write func(c *conn, b *strings.Builder)
}

var infoSections = []infoSection{
	{"server", true, (*conn).infoServer},
	{"clients", true, (*conn).infoClients},
	{"memory", true, (*conn).infoMemory},
	{"persistence", true, (*conn).infoPersistence},
	{"stats", true, (*conn).infoStats},
	{"replication", true, (*conn).infoReplication},
	{"cpu", true, (*conn).infoCPU},
	{"modules", true, func(*conn, *strings.Builder) {}},
	{"commandstats", false, (*conn).infoCommandstats},
	{"errorstats", true, (*conn).infoErrorstats},
	{"cluster", true, (*conn).infoCluster},
	{"keyspace", true, (*conn).infoKeyspace},
}

// infoCmd is INFO [section ...], section names being case-insensitive;
// an unknown one adds nothing.
func (c *conn) infoCmd(args [][]byte) {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	dflt := len(want) == 0 || want["default"]
	all := want["all"] || want["everything"]
	var b strings.Builder
	for _, sec := range infoSections {
		if !(want[sec.name] || dflt && sec.dflt || all) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		title := strings.ToUpper(sec.name[:1]) + sec.name[1:]
		if sec.name == "cpu" {
			title = "CPU"
		}
		fmt.Fprintf(&b, "# %s\r\n", title)
		sec.write(c, &b)
	}
	c.out = protocol.AppendVerbatim(c.out, b.String(), c.proto)
}

// runID identifies this process, as Redis's run_id: 40 random hex digits.
var runID = func() string {
	b := make([]byte, 20)
	rand.Read(b)
	return hex.EncodeToString(b)
}()

func (c *conn) infoServer(b *strings.Builder) {
	s := c.srv
	now := time.Now()
	up := now.Sub(s.start)
	mode, _ := c.mode()
	exe, _ := os.Executable()
	fmt.Fprintf(b, "redis_version:%s\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:0\r\nredis_mode:%s\r\n"+
		"os:%s %s\r\narch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\n"+
		"process_id:%d\r\nprocess_supervised:no\r\nrun_id:%s\r\ntcp_port:%s\r\nserver_time_usec:%d\r\n"+
		"uptime_in_seconds:%d\r\nuptime_in_days:%d\r\nexecutable:%s\r\nconfig_file:\r\nio_threads_active:0\r\n"+
		"flint_version:%s\r\ngo_version:%s\r\ngo_max_procs:%d\r\n",
		redisVersion, mode, runtime.GOOS, runtime.GOARCH, os.Getpid(), runID, port(s), now.UnixMicro(),
		int64(up.Seconds()), int64(up.Hours()/24), exe, Version, runtime.Version(), runtime.GOMAXPROCS(0))
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
	fmt.Fprintf(b, "connected_clients:%d\r\ncluster_connections:0\r\nmaxclients:%d\r\nblocked_clients:0\r\n"+
		"tracking_clients:0\r\nclients_in_timeout_table:0\r\n", n, s.maxClients.Load())
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

// infoMemory is INFO memory: used_memory is the Go heap's live objects,
// as Redis's is what its allocator has handed out.
func (c *conn) infoMemory(b *strings.Builder) {
	m := make([]metrics.Sample, len(memoryMetrics))
	for i, name := range memoryMetrics {
		m[i].Name = name
	}
	metrics.Read(m)
	objects, unused, total, cycles := sampleUint(m[0]), sampleUint(m[1]), sampleUint(m[2]), sampleUint(m[3])
	st := c.srv.kv.Store()
	huge, _ := hugepage.Resident() // 0 where /proc cannot tell
	rss := residentBytes()
	fmt.Fprintf(b, "used_memory:%d\r\nused_memory_human:%s\r\nused_memory_rss:%d\r\nused_memory_rss_human:%s\r\n"+
		"used_memory_dataset:%d\r\nmaxmemory:0\r\nmaxmemory_human:0B\r\nmaxmemory_policy:noeviction\r\n"+
		"mem_fragmentation_ratio:%.2f\r\nmem_allocator:go\r\n"+
		"used_memory_heap:%d\r\nused_memory_sys:%d\r\ndataset_bytes:%d\r\nhuge_pages_bytes:%d\r\ngc_cycles:%d\r\n",
		objects, human(objects), rss, human(rss), st.Bytes(), float64(rss)/float64(max(objects, 1)),
		objects+unused, total, st.Bytes(), huge, cycles)
}

// human writes a byte count as Redis's *_human fields do.
func human(n uint64) string {
	const units = "BKMGTPE"
	if n < 1024 {
		return strconv.FormatUint(n, 10) + "B"
	}
	f, i := float64(n), 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	return fmt.Sprintf("%.2f%c", f, units[i])
}

// residentBytes returns the process's resident set size, or 0 where
// /proc cannot tell.
func residentBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
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
	p, durable := c.srv.kv.(PersistenceInfo)
	fmt.Fprintf(b, "loading:0\r\nasync_loading:0\r\nrdb_last_save_time:%d\r\naof_enabled:%d\r\ndurable:%d\r\n",
		c.srv.lastSave().Unix(), b2i(durable), b2i(durable))
	if !durable {
		b.WriteString("rdb_bgsave_in_progress:0\r\n")
		return
	}
	for _, line := range p.PersistenceInfo() {
		b.WriteString(line)
		b.WriteString("\r\n")
	}
}

func (c *conn) infoStats(b *strings.Builder) {
	st := &c.srv.stats
	fmt.Fprintf(b, "total_connections_received:%d\r\ntotal_commands_processed:%d\r\ntotal_net_input_bytes:%d\r\n"+
		"total_net_output_bytes:%d\r\nrejected_connections:%d\r\nevicted_keys:0\r\nkeyspace_hits:%d\r\nkeyspace_misses:%d\r\n"+
		"total_error_replies:%d\r\n",
		st.connections.Load(), st.commands.Load(), st.netIn.Load(), st.netOut.Load(), st.rejected.Load(),
		st.hits.Load(), st.misses.Load(), c.srv.errors.total.Load())
}

// infoCPU is INFO cpu: the CPU time of the process and of its children,
// in seconds, as getrusage(2) reports it.
func (c *conn) infoCPU(b *strings.Builder) {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	sec := func(t syscall.Timeval) string { return fmt.Sprintf("%d.%06d", t.Sec, t.Usec) }
	fmt.Fprintf(b, "used_cpu_sys:%s\r\nused_cpu_user:%s\r\nused_cpu_sys_children:%s\r\nused_cpu_user_children:%s\r\n",
		sec(self.Stime), sec(self.Utime), sec(children.Stime), sec(children.Utime))
}

// infoKeyspace counts the keys, and those with a deadline, expired ones
// not yet removed included, as Redis's does; avg_ttl is estimated from a
// sample of avgTTLSample of them.
func (c *conn) infoKeyspace(b *strings.Builder) {
	if s := c.srv.kv.Store(); s.Len() > 0 {
		now := max(time.Now().UnixMilli(), s.Clock()/1e6)
		fmt.Fprintf(b, "db0:keys=%d,expires=%d,avg_ttl=%d\r\n", s.Len(), s.Expires(), s.AvgTTL(now, avgTTLSample))
	}
}

// avgTTLSample is about how many deadlines INFO's avg_ttl averages.
const avgTTLSample = 1024
