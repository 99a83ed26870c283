package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	_ "net/http/pprof" // registers the profiling handlers served by --pprof
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/flintkv/flint/internal/node"
	"github.com/flintkv/flint/internal/replica"
	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/store"
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
	fs.IntVar(&cfg.MaxQueryBuffer, "max-query-buffer", d.MaxQueryBuffer, "most unparsed input buffered per client, bytes; a command's arguments count 40 bytes each besides")
	fs.IntVar(&cfg.MaxInputMemory, "max-input-memory", d.MaxInputMemory, "most input all clients together buffer beyond 256 KiB each, for large commands, bytes;\na client whose command would take more is dropped")
	fs.IntVar(&cfg.MaxOutputBuffer, "max-output-buffer", d.MaxOutputBuffer, "reply bytes buffered per client before they are written out, bytes")
	fs.IntVar(&cfg.MaxPubSubOutput, "max-pubsub-output", d.MaxPubSubOutput, "drop a subscriber with more than this many bytes of messages and replies waiting to be sent, bytes")
	fs.DurationVar(&cfg.OutputTimeout, "output-timeout", d.OutputTimeout, "drop a client that accepts no replies for this long")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 0, "drop a client idle for this long (0: never)")
	fs.DurationVar(&cfg.ExpireDelay, "expire-delay", d.ExpireDelay, "remove an expired key at most this long after its deadline, plus a commit")
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
	var cf clusterFlags
	cf.register(fs)
	var sf shardFlags
	sf.register(fs)
	var hf hostFlags
	hf.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: flint serve [flags]\n\nRuns a Flint server speaking the Redis protocol: a single node, or, with --id and\n--initial-members, a member of a replicated group; with --shard-group, a data node of a\nsharded cluster, and with --manager, one of its managers; with --host-nodes and\n--host-groups, a node of a sharded cluster that hosts members of several data groups\n(each on its own client port) on one log.\n\nflags:\n")
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
	var cluster *node.ClusterConfig
	var shard *node.ShardConfig
	var hosted []node.HostedGroup
	var err error
	if hf.on() {
		cluster, hosted, shard, err = hf.config(&cf, &sf, cfg.RequirePass)
	} else if cluster, err = cf.config(fs, &cfg); err == nil {
		shard, err = sf.config(cluster, cfg.RequirePass)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "flint serve: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = node.Run(ctx, node.Config{Dir: *dir, Server: cfg, HugePages: *hugePages, Pprof: *pprofAddr,
		ShutdownTimeout: *shutdownTimeout, Logger: cfg.Logger, Cluster: cluster, Shard: shard, Memory: sf.manager && cluster == nil, Hosted: hosted,
		Replica: replica.Options{NoSync: *fsync == "never", Preallocate: true,
			SnapshotEntries: *snapEntries, SnapshotBytes: *snapBytes, SegmentSize: *segBytes,
			Store: store.Options{Stripes: *stripes, MaxValue: cfg.MaxBulk}}})
	if err != nil {
		cfg.Logger.Error("stopped", "err", err)
		return 1
	}
	return 0
}

// maxBulkLimit is the largest --max-bulk: a key or a value up to it,
// written alone, fits the replica's largest batch, and so a log record.
const maxBulkLimit = 512 << 20

func validate(cfg server.Config) error {
	for _, f := range []struct {
		name string
		v    int
	}{{"maxclients", cfg.MaxClients}, {"max-bulk", cfg.MaxBulk}, {"max-args", cfg.MaxArgs},
		{"max-inline", cfg.MaxInline}, {"max-query-buffer", cfg.MaxQueryBuffer}, {"max-output-buffer", cfg.MaxOutputBuffer},
		{"max-pubsub-output", cfg.MaxPubSubOutput}, {"max-input-memory", cfg.MaxInputMemory}} {
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
	if cfg.MaxInputMemory < cfg.MaxQueryBuffer {
		return fmt.Errorf("--max-input-memory (%d) must be at least --max-query-buffer (%d)", cfg.MaxInputMemory, cfg.MaxQueryBuffer)
	}
	if cfg.OutputTimeout <= 0 || cfg.IdleTimeout < 0 {
		return errors.New("--output-timeout must be positive and --idle-timeout not negative")
	}
	if cfg.ExpireDelay < 2*time.Millisecond {
		return fmt.Errorf("--expire-delay must be at least 2ms, got %v", cfg.ExpireDelay)
	}
	return nil
}

// clusterFlags are serve's flags for a member of a replicated group.
type clusterFlags struct {
	id                                uint64
	members, join, peerListen, secret string
	name                              string
	tick                              time.Duration
	electionTicks                     int
}

func (f *clusterFlags) register(fs *flag.FlagSet) {
	fs.Uint64Var(&f.id, "id", 0, "this member's id in a replicated group (with --initial-members)")
	fs.StringVar(&f.members, "initial-members", "", "the group's first members, the same list on each: id=host:port@peerport,...\n(host:port is where clients connect; peerport, or peerhost:peerport, where members do)")
	fs.StringVar(&f.join, "join", "", "join the group of --initial-members as a new member (with a new --id), reachable at\nclient-host:port@peerport; the leader adds it with FLINT.MEMBER ADD id client-host:port@peerport")
	fs.StringVar(&f.peerListen, "peer-listen", "", "where to listen for peers, when it differs from the peer address the group knows\nthis member by (behind a proxy or NAT; default: that address)")
	fs.StringVar(&f.secret, "cluster-secret", "", "the secret members of a group share to recognize each other (default: $FLINT_CLUSTER_SECRET)")
	fs.StringVar(&f.name, "cluster-name", "", "names the group, the same on every member, in place of its first members' ids and peer\naddresses (for members that name each other's addresses differently)")
	fs.DurationVar(&f.tick, "raft-tick", 100*time.Millisecond, "raft's clock tick in a replicated group")
	fs.IntVar(&f.electionTicks, "election-ticks", 10, "ticks without a leader before a follower campaigns (a random 1x to 2x of it)")
}

// config returns the group a replicated member belongs to, from its
// flags, or nil for a single node. The member listens for clients at its
// own entry's address unless --addr says otherwise.
func (f *clusterFlags) config(fs *flag.FlagSet, cfg *server.Config) (*node.ClusterConfig, error) {
	if f.members == "" {
		if f.id != 0 || f.join != "" || f.peerListen != "" || f.name != "" {
			return nil, errors.New("--id, --join, --peer-listen and --cluster-name need --initial-members")
		}
		return nil, nil
	}
	ms, err := node.ParseMembers(f.members)
	if err != nil {
		return nil, fmt.Errorf("--initial-members: %v", err)
	}
	var me node.Member
	var joining *node.Member
	i := slices.IndexFunc(ms, func(m node.Member) bool { return m.ID == f.id })
	switch {
	case f.join != "" && i >= 0:
		return nil, fmt.Errorf("--join needs a new --id: %d is one of --initial-members", f.id)
	case f.join != "":
		j, err := node.ParseMembers(fmt.Sprintf("%d=%s", f.id, f.join))
		if err != nil {
			return nil, fmt.Errorf("--join: %v", err)
		}
		me, joining = j[0], &j[0]
	case i < 0:
		return nil, fmt.Errorf("--id %d is not among --initial-members (a new member joins with --join)", f.id)
	default:
		me = ms[i]
	}
	secret := f.secret
	if secret == "" {
		secret = os.Getenv("FLINT_CLUSTER_SECRET")
	}
	if secret == "" {
		return nil, errors.New("a replicated group needs --cluster-secret (or $FLINT_CLUSTER_SECRET), the same on every member")
	}
	if f.tick <= 0 || f.electionTicks < 2 {
		return nil, errors.New("--raft-tick must be positive and --election-ticks at least 2")
	}
	explicit := false
	fs.Visit(func(fl *flag.Flag) { explicit = explicit || fl.Name == "addr" })
	if !explicit {
		cfg.Addr = me.Client
	}
	if f.peerListen != "" {
		if _, _, err := net.SplitHostPort(f.peerListen); err != nil {
			return nil, fmt.Errorf("--peer-listen: %v", err)
		}
	}
	return &node.ClusterConfig{ID: f.id, Members: ms, Join: joining, PeerListen: f.peerListen, Secret: []byte(secret), Name: f.name,
		TickInterval: f.tick, ElectionTicks: f.electionTicks}, nil
}
