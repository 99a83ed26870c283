package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	_ "net/http/pprof" // registers the profiling handlers served by --pprof
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/flintkv/flint/internal/hugepage"
	"github.com/flintkv/flint/internal/replica"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/store"
	"github.com/flintkv/flint/internal/vfs"
)

// serve runs `flint serve`.
func serve(args []string) int {
	d := server.DefaultConfig
	cfg := server.Config{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&cfg.Addr, "addr", d.Addr, "address to listen on (host:port)")
	fs.StringVar(&cfg.RequirePass, "requirepass", "", "password clients must AUTH with (default: $FLINT_PASSWORD; empty: none)")
	fs.IntVar(&cfg.MaxClients, "maxclients", d.MaxClients, "most client connections open at once")
	fs.IntVar(&cfg.MaxBulk, "max-bulk", d.MaxBulk, "longest bulk string (key or value) a client may send, bytes; at most 512 MiB")
	fs.IntVar(&cfg.MaxArgs, "max-args", d.MaxArgs, "most arguments in one command")
	fs.IntVar(&cfg.MaxInline, "max-inline", d.MaxInline, "longest inline command, bytes")
	fs.IntVar(&cfg.MaxQueryBuffer, "max-query-buffer", d.MaxQueryBuffer, "most unparsed input buffered per client, bytes")
	fs.IntVar(&cfg.MaxOutputBuffer, "max-output-buffer", d.MaxOutputBuffer, "reply bytes buffered per client before they are written out, bytes")
	fs.DurationVar(&cfg.OutputTimeout, "output-timeout", d.OutputTimeout, "drop a client that accepts no replies for this long")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 0, "drop a client idle for this long (0: never)")
	stripes := fs.Int("lock-stripes", store.DefaultStripes(), "lock stripes in the store (rounded up to a power of two)")
	dir := fs.String("dir", "./data", "data directory: the write-ahead log and snapshots")
	fsync := fs.String("fsync", "always", "always: acknowledge writes once fsynced; never (benchmarks only): a power loss\nloses recent acknowledged writes, a process crash does not")
	snapEntries := fs.Uint64("snapshot-entries", 1_000_000, "take a snapshot after this many log entries")
	snapBytes := fs.Int64("snapshot-bytes", 256<<20, "take a snapshot after this many bytes of log")
	segBytes := fs.Int64("segment-bytes", 64<<20, "start a new log segment after this many bytes")
	hugePages := fs.Bool("huge-pages", true, "move the settled parts of the heap into transparent huge pages (MADV_COLLAPSE):\nfaster random access to a large store, for a little more memory")
	pprofAddr := fs.String("pprof", "", "serve Go profiles (net/http/pprof) on this address, e.g. 127.0.0.1:6060 (default: off)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	shutdownTimeout := fs.Duration("shutdown-timeout", 10*time.Second, "on SIGTERM or SIGINT, wait this long for clients' commands to finish, then close\ntheir connections, with no reply to writes still waiting (for disk space, say)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: flint serve [flags]\n\nRuns a Flint server speaking the Redis protocol.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if !parseFlags(fs, args) {
		return 2
	}
	if *fsync != "always" && *fsync != "never" {
		fmt.Fprintf(os.Stderr, "flint serve: --fsync must be always or never, got %q\n", *fsync)
		return 2
	}
	if *shutdownTimeout <= 0 {
		fmt.Fprintf(os.Stderr, "flint serve: --shutdown-timeout must be positive\n")
		return 2
	}
	if *snapEntries == 0 || *snapBytes <= 0 || *segBytes <= 0 {
		fmt.Fprintf(os.Stderr, "flint serve: --snapshot-entries, --snapshot-bytes and --segment-bytes must be positive\n")
		return 2
	}
	if err := validate(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "flint serve: %v\n", err)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "flint serve: bad --log-level %q\n", *logLevel)
		return 2
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if cfg.RequirePass == "" {
		cfg.RequirePass = os.Getenv("FLINT_PASSWORD")
	}
	if *pprofAddr != "" {
		go servePprof(*pprofAddr, cfg.Logger)
	}
	if *hugePages {
		// Before the replica loads the store: its heap settles once loaded.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go keepHugePages(ctx, cfg.Logger)
	}
	lock, err := lockDir(*dir, cfg.Logger)
	if err != nil {
		cfg.Logger.Error("cannot use the data directory", "dir", *dir, "err", err)
		return 1
	}
	defer lock.Close()
	rep, err := replica.Open(replica.Options{Dir: *dir, NoSync: *fsync == "never", Preallocate: true,
		SnapshotEntries: *snapEntries, SnapshotBytes: *snapBytes, SegmentSize: *segBytes,
		Store: store.Options{Stripes: *stripes, MaxValue: cfg.MaxBulk}, Logger: cfg.Logger})
	if err != nil {
		cfg.Logger.Error("cannot open the data directory", "dir", *dir, "err", err)
		return 1
	}
	if *fsync == "always" {
		addLogProcessor() // after Open: the store's stripes and the recovery use the default
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, server.New(cfg, rep), rep, *shutdownTimeout, cfg.Logger)
}

// addLogProcessor gives the Go scheduler one processor (GOMAXPROCS) more
// than its default, unless the GOMAXPROCS variable sets them (a positive
// number: the runtime ignores anything else). The log's
// writer holds one through each fsync (vfs.SyncHeld), blocked in the kernel
// rather than computing; with one more, as many as the machine has CPUs
// stay free to run goroutines meanwhile. Setting the number stops the
// runtime's own updates of its default (to a container's new CPU limit).
// Measured in docs/PERFORMANCE.md ("The log's fsync keeps its processor").
func addLogProcessor() {
	if n, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err != nil || n <= 0 {
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	}
}

// lockDir takes an exclusive lock on dir/LOCK, made with dir if needed
// (durably, as the replica would make it), and holds it until the file is
// closed or the process ends, so that two servers never share a data
// directory: each would write over the other's log. It fails at once if
// another process holds the lock. If the disk is too full to make them, it
// says so, once, and tries again every retryLock.
func lockDir(dir string, logger *slog.Logger) (*os.File, error) {
	var f *os.File
	logged := false
	err := vfs.RetryNoSpace(func() (err error) {
		if err = vfs.MkdirAll(vfs.OS, dir); err == nil {
			f, err = os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
		}
		return err
	}, func(err error) bool {
		if !logged {
			logger.Error("the disk is full: the node cannot start serving until space is freed, "+
				"as it must make its data directory first", "dir", dir, "err", err)
			logged = true
		}
		time.Sleep(retryLock)
		return true
	})
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another process is using it: it holds the lock on %s", f.Name())
		}
		return nil, fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	return f, nil
}

// retryLock is how often lockDir tries again to make a data directory on a
// full disk.
const retryLock = time.Second

// maxBulkLimit is the largest --max-bulk: a key or a value up to it,
// written alone, fits the replica's largest batch, and so a log record.
const maxBulkLimit = 512 << 20

func validate(cfg server.Config) error {
	for _, f := range []struct {
		name string
		v    int
	}{{"maxclients", cfg.MaxClients}, {"max-bulk", cfg.MaxBulk}, {"max-args", cfg.MaxArgs},
		{"max-inline", cfg.MaxInline}, {"max-query-buffer", cfg.MaxQueryBuffer}, {"max-output-buffer", cfg.MaxOutputBuffer}} {
		if f.v <= 0 {
			return fmt.Errorf("--%s must be positive, got %d", f.name, f.v)
		}
	}
	if cfg.MaxBulk > maxBulkLimit {
		return fmt.Errorf("--max-bulk must be at most %d (512 MiB), got %d: every write must fit one log record", maxBulkLimit, cfg.MaxBulk)
	}
	if cfg.MaxQueryBuffer < cfg.MaxBulk {
		return fmt.Errorf("--max-query-buffer (%d) must be at least --max-bulk (%d)", cfg.MaxQueryBuffer, cfg.MaxBulk)
	}
	if cfg.OutputTimeout <= 0 || cfg.IdleTimeout < 0 {
		return errors.New("--output-timeout must be positive and --idle-timeout not negative")
	}
	return nil
}

// run serves until ctx is done (SIGINT or SIGTERM), then shuts down
// gracefully: it lets clients' commands finish for up to timeout, then
// closes their connections and the replica, so that a write waiting for
// disk space does not hold up the shutdown (its client gets no reply). If the
// replica fails (an fsync error, say), before or during the shutdown, run
// returns 1; it stops at once if that comes first.
func run(ctx context.Context, srv *server.Server, rep *replica.Replica, timeout time.Duration, log *slog.Logger) int {
	closeRep := sync.OnceValue(rep.Close)
	defer closeRep()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		log.Error("server failed", "err", err)
		return 1
	case <-rep.Dead():
		log.Error("stopping: the node can no longer make writes durable", "err", rep.Err())
		return 1
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	context.AfterFunc(sctx, func() { closeRep() })
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown timed out; closed remaining clients", "err", err)
	}
	<-errc
	cerr := closeRep()
	if err := rep.Err(); !errors.Is(err, replica.ErrClosed) {
		log.Error("stopped: the node could no longer make writes durable", "err", err)
		return 1
	}
	if cerr != nil {
		log.Error("stopped: closing the log failed", "err", cerr)
		return 1
	}
	log.Info("stopped")
	return 0
}

// keepHugePages collapses the settled parts of the heap into huge pages
// every 100 ms until ctx is done (see package hugepage). Failures are
// logged, at most once a minute, not fatal: the server runs as fast as the
// system's setting allows.
func keepHugePages(ctx context.Context, log *slog.Logger) {
	var last time.Time
	report := func(err error) {
		if time.Since(last) >= time.Minute {
			last = time.Now()
			log.Warn("cannot move the heap into huge pages; will try again", "err", err)
		}
	}
	if err := hugepage.Keep(ctx, 100*time.Millisecond, report); err != nil {
		log.Info("serving without huge pages", "err", err)
	}
}

// servePprof serves the profiling handlers; a failure is logged, not fatal.
func servePprof(addr string, log *slog.Logger) {
	log.Info("serving profiles", "addr", addr)
	if err := http.ListenAndServe(addr, nil); err != nil {
		log.Error("pprof server failed", "err", err)
	}
}
