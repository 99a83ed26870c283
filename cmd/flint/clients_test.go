package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/proctest"
)

// clusterClient is a go-redis ClusterClient for the members at addrs,
// set to ride through a failover. go-redis reloads the slots on MOVED, but
// not when the master's connection is refused: it goes back to a dead
// leader until its state is ClusterStateReloadInterval old (60 s by
// default). go-redis gives each node's client ClusterOptions.MaxRetries
// too, and retries a dead node's dial DialerRetries times per try: a dead
// leader then holds a command for MaxRetries x DialerRetries dials before
// the cluster client looks elsewhere. MaxRedirects bounds the cluster's
// own tries (10 s of them at MaxRetryBackoff). The client gets a copy of
// addrs, since it appends the members it learns of to its Addrs.
func clusterClient(addrs []string) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: slices.Clip(slices.Clone(addrs)),
		ClusterStateReloadInterval: 500 * time.Millisecond, MaxRedirects: 50, MaxRetries: 1, DialerRetries: 1,
		MinRetryBackoff: 20 * time.Millisecond, MaxRetryBackoff: 200 * time.Millisecond})
}

// writer writes k0, k1, ... through a ClusterClient, one at a time, until
// it is stopped, and records each acknowledged write and the address of
// the member that acknowledged it.
type writer struct {
	t      *testing.T
	cc     *redis.ClusterClient
	cancel context.CancelFunc
	done   chan struct{}
	mu     struct {
		sync.Mutex
		served []string      // by key index: the member that acknowledged k<i>
		errs   []error       // the writes that failed, in order
		gap    time.Duration // the longest time between two writes' returns
	}
}

// maxWrites bounds a writer's loop, whatever the test does.
const maxWrites = 100_000

func startWriter(ctx context.Context, t *testing.T, cc *redis.ClusterClient) *writer {
	ctx, cancel := context.WithCancel(ctx)
	w := &writer{t: t, cc: cc, cancel: cancel, done: make(chan struct{})}
	var servedBy string // the member that acknowledged the last SET; only the writer's goroutine touches it
	cc.OnNewNode(func(node *redis.Client) { node.AddHook(servedHook{node.Options().Addr, &servedBy}) })
	go func() {
		defer close(w.done)
		returned := time.Now()
		for i := 0; i < maxWrites && ctx.Err() == nil; i++ {
			err := cc.Set(ctx, fmt.Sprint("k", i), fmt.Sprint(i), 0).Err()
			w.mu.Lock()
			w.mu.gap = max(w.mu.gap, time.Since(returned))
			returned = time.Now()
			if err != nil && ctx.Err() == nil {
				w.mu.errs = append(w.mu.errs, fmt.Errorf("SET k%d: %w", i, err))
				servedBy = ""
			}
			w.mu.served = append(w.mu.served, servedBy)
			w.mu.Unlock()
		}
	}()
	return w
}

// servedHook records, in *last, the address of the node whose client
// completed a SET without error.
type servedHook struct {
	addr string
	last *string
}

func (h servedHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h servedHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h servedHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if cmd.Name() == "set" { // only the writer's goroutine sends SET
			*h.last = ""
			if err == nil {
				*h.last = h.addr
			}
		}
		return err
	}
}

// await waits until n more writes than now are acknowledged by the member
// at addr ("" for any), and fails the test after 30 s.
func (w *writer) await(n int, addr string) {
	w.t.Helper()
	count := func() (acked int) {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, a := range w.mu.served {
			if a != "" && (addr == "" || a == addr) {
				acked++
			}
		}
		return acked
	}
	want := count() + n
	for deadline := time.Now().Add(30 * time.Second); count() < want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			w.t.Fatalf("the writer has %d of %d acknowledged writes at %q after 30 s; errors: %v", count(), want, addr, w.errors())
		}
	}
}

func (w *writer) errors() []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]error(nil), w.mu.errs...)
}

// stop stops the writer and returns, by key index, the member that
// acknowledged each write ("" for a failed one), and the longest time
// between two writes' returns.
func (w *writer) stop() ([]string, time.Duration) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.served, w.mu.gap
}

// TestClusterClientReplace replaces a member of a group of three while
// go-redis's ClusterClient writes to it: a fourth member joins (--join,
// FLINT.MEMBER ADD), one of the first three is removed (a follower, or
// the leader itself, directly) and exits, and leadership is transferred
// to the new member. The client, which was given only the first three
// addresses, finds each new leader by itself, the last one the new member;
// every write succeeds but one in flight at a leader that steps down,
// which Flint answers as of unknown outcome; and every acknowledged write
// reads back through a fresh client of the new configuration.
func TestClusterClientReplace(t *testing.T) {
	for _, gone := range []string{"follower", "leader"} {
		t.Run(gone, func(t *testing.T) { testReplace(t, gone == "leader") })
	}
}

func testReplace(t *testing.T, leader bool) {
	g := startGroup(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cc := clusterClient(g.addrs)
	defer cc.Close()
	start := time.Now()
	w := startWriter(ctx, t, cc)
	defer w.stop()
	w.await(50, "")
	lead := g.leader(ctx)
	m4 := g.join()
	admin(ctx, t, g.addrs[lead], "flint.member", "add", m4+1, g.joinAddr(m4))
	t.Logf("%v: member %d added", time.Since(start), m4+1)
	w.await(50, "")
	gone := (lead + 1) % 3
	if leader {
		gone = lead
	}
	admin(ctx, t, g.addrs[lead], "flint.member", "remove", gone+1)
	g.awaitRemoved(gone)
	t.Logf("%v: member %d (leader: %v) removed and exited", time.Since(start), gone+1, leader)
	w.await(50, "")
	if lead = g.leader(ctx); lead != m4 {
		admin(ctx, t, g.addrs[lead], "flint.member", "transfer", m4+1)
	}
	w.await(50, g.addrs[m4])
	t.Logf("%v: member %d leads and acknowledges the client's writes", time.Since(start), m4+1)
	served, gap := w.stop()
	// A write in flight at a leader that steps down (for the transfer, or
	// its own removal) may or may not take effect, and Flint says so
	// (UNKNOWN) rather than let a client without a session send it again:
	// go-redis returns that error. Any other is a failure to ride through.
	unknown := 0
	for _, err := range w.errors() {
		if !strings.Contains(err.Error(), ": UNKNOWN ") {
			t.Fatalf("the client did not ride through: %v (all errors: %v)", err, w.errors())
		}
		unknown++
	}
	count := make([]int, len(g.addrs)) // by member index
	for _, a := range served {
		if i := slices.Index(g.addrs, a); i >= 0 {
			count[i]++
		}
	}
	t.Logf("%v: %d writes, %d of unknown outcome, the longest between two %v; acknowledged by members 1 to 4: %v",
		time.Since(start), len(served), unknown, gap.Round(time.Millisecond), count)

	fresh := clusterClient(g.live())
	defer fresh.Close()
	for k, a := range served {
		if v, err := fresh.Get(ctx, fmt.Sprint("k", k)).Result(); a != "" && (err != nil || v != fmt.Sprint(k)) {
			t.Fatalf("k%d, acknowledged by %s: %q (%v)", k, a, v, err)
		}
	}
}

// admin sends an admin command to the member at addr, once, and fails the
// test if it fails.
func admin(ctx context.Context, t *testing.T, addr string, args ...any) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	if err := c.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("%v at %s: %v", args, addr, err)
	}
}

// The tests below drive clients that are not Go modules: redis-py and
// redis-cli. `make clients` installs them (CI runs it); without them the
// tests skip, unless FLINT_REQUIRE_CLIENTS is set, as CI sets it, when they
// fail.

// missingClient skips the test, or fails it if FLINT_REQUIRE_CLIENTS is
// set, for want of a client it drives.
func missingClient(t *testing.T, what string) {
	t.Helper()
	msg := what + "; `make clients` installs redis-cli (Debian's redis-tools, with apt-get), redis-rb " +
		"(Debian's ruby-redis) and redis-py (in bin/pyclients), or set FLINT_REDIS_CLI, FLINT_RUBY and " +
		"FLINT_PYTHON to ones installed elsewhere"
	if os.Getenv("FLINT_REQUIRE_CLIENTS") != "" {
		t.Fatal(msg + " (FLINT_REQUIRE_CLIENTS is set: CI must install them)")
	}
	t.Skip(msg)
}

// redisCLI returns the path of redis-cli: $FLINT_REDIS_CLI, or redis-cli
// on PATH.
func redisCLI(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath(cmp.Or(os.Getenv("FLINT_REDIS_CLI"), "redis-cli"))
	if err != nil {
		missingClient(t, fmt.Sprintf("no redis-cli (%v)", err))
	}
	return path
}

// redisPy returns the path of a Python that has redis-py: $FLINT_PYTHON,
// else the one `make clients` installs in bin/pyclients, else python3 on
// PATH.
func redisPy(t *testing.T) string {
	t.Helper()
	try := []string{os.Getenv("FLINT_PYTHON")}
	if try[0] == "" {
		try = []string{"../../bin/pyclients/bin/python", "python3"}
	}
	for _, name := range try {
		path, err := exec.LookPath(name)
		if err == nil && exec.Command(path, "-c", "import redis.cluster").Run() == nil {
			return path
		}
	}
	missingClient(t, fmt.Sprintf("no Python with redis-py among %q", try))
	return ""
}

// TestRedisPyFailover runs testdata/rediscluster.py, which writes and
// reads keys through redis-py's RedisCluster with no code of its own for
// redirections or failures, against a group of three, and kills the leader
// with SIGKILL once the script has 150 of its 600 writes acknowledged. The
// script must go on to its last write by itself, and every write must then
// read back from the two members left.
func TestRedisPyFailover(t *testing.T) {
	py := redisPy(t)
	g := startGroup(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const writes, killAt = 600, 150
	lead := g.leader(ctx)
	cmd := exec.CommandContext(ctx, py, "testdata/rediscluster.py", strings.Join(g.addrs, ","), fmt.Sprint(writes), "90")
	stderr := &proctest.Buffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var killed time.Time
	var acks []time.Time // when the script had each write acknowledged, by its clock
	for lines := bufio.NewScanner(out); lines.Scan(); {
		var i int
		var at float64
		if _, err := fmt.Sscanf(lines.Text(), "ack %d %f", &i, &at); err != nil {
			t.Logf("%v: the script says: %s", time.Since(start), lines.Text())
			continue
		}
		if i != len(acks) {
			t.Fatalf("the script acknowledged py%d after %d writes", i, len(acks))
		}
		acks = append(acks, time.Unix(0, int64(at*1e9)))
		if i == killAt {
			g.kill(lead)
			killed = time.Now()
			t.Logf("%v: %d writes; killed the leader, member %d", time.Since(start), len(acks), lead+1)
		}
	}
	if err := cmd.Wait(); err != nil || len(acks) != writes {
		t.Fatalf("the script ended with %v after %d of %d writes; its stderr:\n%s", err, len(acks), writes, stderr)
	}
	// The script runs ahead of this reader: the write that waited for the
	// failover is the one after the longest gap that ends after the kill.
	var stall, before time.Duration
	for i := 1; i < len(acks); i++ {
		if gap := acks[i].Sub(acks[i-1]); acks[i].After(killed) {
			stall = max(stall, gap)
		} else {
			before = max(before, gap)
		}
	}
	t.Logf("%v: %d writes; the longest wait for one after the kill: %v (before it: %v)", time.Since(start), len(acks), stall, before)
	fresh := clusterClient(g.live())
	defer fresh.Close()
	for i := range writes {
		if v, err := fresh.Get(ctx, fmt.Sprint("py", i)).Result(); err != nil || v != fmt.Sprint(i) {
			t.Fatalf("py%d, acknowledged to redis-py: %q (%v)", i, v, err)
		}
	}
}

// TestRedisCliFailover runs redis-cli, one command per run: without -c a
// follower answers a write MOVED to the leader, and with -c redis-cli
// follows it. Then the leader is killed with SIGKILL, and redis-cli -c is
// run again and again against each member left, as an operator would,
// until it succeeds (once a new leader is elected): the write then reads
// back through the other member.
func TestRedisCliFailover(t *testing.T) {
	cli := redisCLI(t)
	g := startGroup(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(addr string, args ...string) string {
		host, port, _ := net.SplitHostPort(addr)
		out, _ := exec.CommandContext(ctx, cli, append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	lead := g.leader(ctx)
	follower, other := (lead+1)%3, (lead+2)%3
	slot := run(g.addrs[follower], "CLUSTER", "KEYSLOT", "cli:k")
	if out, want := run(g.addrs[follower], "SET", "cli:k", "v"), "MOVED "+slot+" "+g.addrs[lead]; out != want {
		t.Fatalf("redis-cli SET at a follower: %q, want %q", out, want)
	}
	if out := run(g.addrs[follower], "-c", "SET", "cli:k", "v"); out != "OK" {
		t.Fatalf("redis-cli -c SET at a follower: %q", out)
	}
	if out := run(g.addrs[other], "-c", "GET", "cli:k"); out != "v" {
		t.Fatalf("redis-cli -c GET at the other follower: %q", out)
	}

	g.kill(lead)
	killed := time.Now()
	for _, i := range []int{follower, other} {
		key := fmt.Sprint("cli:after-kill-", i+1)
		said := map[string]int{} // what the runs that failed printed
		for tries := 1; ; tries++ {
			out := run(g.addrs[i], "-c", "SET", key, "x")
			if out == "OK" {
				t.Logf("redis-cli -c SET at member %d: OK %v after the kill, on run %d; the runs before said %v",
					i+1, time.Since(killed).Round(time.Millisecond), tries, said)
				break
			}
			said[out]++
			if time.Since(killed) > 20*time.Second {
				t.Fatalf("redis-cli -c SET at member %d still fails 20 s after the leader was killed: %v", i+1, said)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if out := run(g.addrs[follower+other-i], "-c", "GET", key); out != "x" {
			t.Fatalf("redis-cli -c GET %s at member %d: %q", key, follower+other-i+1, out)
		}
	}
}
