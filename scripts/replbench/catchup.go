package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// catchupConfig configures the catch-up measurement.
type catchupConfig struct {
	bin       string
	out       string
	serve     []string
	behind    int64 // bytes of values to write while the follower is down
	valueSize int
	keyspace  int
	workers   int
	pipeline  int
	reads     float64 // fraction of the steady load's operations that are GETs
	before    time.Duration
	after     time.Duration
	timeout   time.Duration
}

// progress is a member's replication state as the leader reports it.
type progress struct{ match, lag uint64 }

// replication parses the leader's INFO replication: each other member's
// match index and lag by member id, and the commit index.
func replication(addr string) (map[int]progress, uint64, bool) {
	s, ok := do(addr, "info", "replication").(string)
	if !ok || !strings.Contains(s, "role:master") {
		return nil, 0, false
	}
	m, commit := map[int]progress{}, uint64(0)
	for _, line := range strings.Split(s, "\r\n") {
		if strings.HasPrefix(line, "flint_commit_index:") {
			commit, _ = strconv.ParseUint(strings.TrimPrefix(line, "flint_commit_index:"), 10, 64)
		}
		if !strings.HasPrefix(line, "slave") {
			continue
		}
		var p progress
		id := 0
		_, v, _ := strings.Cut(line, ":")
		for _, kv := range strings.Split(v, ",") {
			k, val, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseUint(val, 10, 64)
			switch k {
			case "offset":
				p.match = n
			case "lag":
				p.lag = n
			case "member":
				id = int(n)
			}
		}
		m[id] = p
	}
	return m, commit, true
}

// steady is a closed-loop load on one server: workers each send pipelines
// of GETs and SETs of 128-byte values and wait for the replies. It counts
// operations in 100 ms buckets and keeps each pipeline's latency.
type steady struct {
	client  atomic.Pointer[redis.Client] // the leader's; replaced when another member leads
	cfg     catchupConfig
	start   time.Time
	buckets []atomic.Int64
	errs    atomic.Int64
	mu      sync.Mutex
	lat     []batchLat
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped sync.Once
}

type batchLat struct {
	at time.Duration // since start, at the reply
	d  time.Duration
}

const bucket = 100 * time.Millisecond

func startSteady(addr string, cfg catchupConfig, maxRun time.Duration) (*steady, error) {
	c := newClient(addr, cfg.workers)
	val := strings.Repeat("v", 128)
	ctx := context.Background()
	for k := 0; k < cfg.keyspace; k += 1000 { // the keys the load reads exist
		args := []any{}
		for i := k; i < min(k+1000, cfg.keyspace); i++ {
			args = append(args, fmt.Sprint("steady:", i), val)
		}
		if err := c.MSet(ctx, args...).Err(); err != nil {
			c.Close()
			return nil, fmt.Errorf("loading the steady load's keys: %w", err)
		}
	}
	s := &steady{cfg: cfg, start: time.Now(), buckets: make([]atomic.Int64, int(maxRun/bucket)+1)}
	s.client.Store(c)
	ctx, s.cancel = context.WithCancel(ctx)
	for w := range cfg.workers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			var lats []batchLat
			defer func() { s.mu.Lock(); s.lat = append(s.lat, lats...); s.mu.Unlock() }()
			for ctx.Err() == nil {
				p := s.client.Load().Pipeline()
				for range cfg.pipeline {
					key := fmt.Sprint("steady:", rng.IntN(cfg.keyspace))
					if rng.Float64() < cfg.reads {
						p.Get(ctx, key)
					} else {
						p.Set(ctx, key, val, 0)
					}
				}
				t0 := time.Now()
				_, err := p.Exec(ctx)
				now := time.Now()
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					s.errs.Add(1)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if b := int(now.Sub(s.start) / bucket); b < len(s.buckets) {
					s.buckets[b].Add(int64(cfg.pipeline))
				}
				lats = append(lats, batchLat{now.Sub(s.start), now.Sub(t0)})
			}
		}()
	}
	return s, nil
}

func newClient(addr string, conns int) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, PoolSize: conns, MaxRetries: -1})
}

// follow points the load at another leader. (The old client is left open:
// a worker may still be using it, and this happens rarely.)
func (s *steady) follow(addr string) {
	s.client.Store(newClient(addr, s.cfg.workers))
}

// stop ends the load; later calls do nothing.
func (s *steady) stop() {
	s.stopped.Do(func() { s.cancel(); s.wg.Wait(); s.client.Load().Close() })
}

// window returns the operations per second and the p99 pipeline latency
// between from and to (times since start).
func (s *steady) window(from, to time.Duration) (opsPerSec float64, p99 time.Duration) {
	b0, b1 := int(from/bucket), int(to/bucket)
	var ops int64
	for b := b0; b < b1 && b < len(s.buckets); b++ {
		ops += s.buckets[b].Load()
	}
	var ds []time.Duration
	for _, l := range s.lat {
		if l.at >= time.Duration(b0)*bucket && l.at < time.Duration(b1)*bucket {
			ds = append(ds, l.d)
		}
	}
	if len(ds) > 0 {
		slices.Sort(ds)
		p99 = ds[min(len(ds)-1, len(ds)*99/100)]
	}
	return float64(ops) / (float64(b1-b0) * bucket.Seconds()), p99
}

// catchup is one catch-up measurement.
type catchup struct {
	cfg       catchupConfig
	g         *deployment
	lead, fol *server // the leader (the current one), and the follower stopped and restarted
	ld        *steady

	// Times since ld.start: the restart, when the follower reached the
	// leader's commit index at the restart, and when it was no further
	// behind than the other follower.
	restart, reach, level time.Duration
	changes               int // leader changes seen meanwhile
	// The members' memory over the load's last 10 s before the restart,
	// during the catch-up, and after it.
	memBefore, mem, memAfter *peakMem
	progress                 []string // CSV lines
}

// runCatchup stops a follower of a fresh 3-member group, writes cfg.behind
// bytes of values, starts a steady load, restarts the follower while the
// load runs, and reports how long the follower took to catch up and the
// load's throughput before, during and after.
func runCatchup(cfg catchupConfig) error {
	root, err := os.MkdirTemp("", "catchup")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	g, err := startGroup(cfg.bin, root, 3, cfg.serve)
	if err != nil {
		return err
	}
	defer g.stop()
	li, _ := g.leader(time.Minute)
	c := &catchup{cfg: cfg, g: g, lead: g.members[li], fol: g.members[(li+1)%3],
		memBefore: newPeakMem(), mem: newPeakMem(), memAfter: newPeakMem()}
	if err := c.fallBehind(); err != nil {
		return err
	}
	if c.ld, err = startSteady(c.lead.addr, cfg, cfg.before+cfg.timeout+cfg.after+10*time.Second); err != nil {
		return err
	}
	defer c.ld.stop()
	time.Sleep(max(cfg.before-10*time.Second, 0))
	c.watch(min(cfg.before, 10*time.Second), c.memBefore, "before")
	_, commit, _ := replication(c.lead.addr)
	c.restart = time.Since(c.ld.start)
	fmt.Printf("restarting member %d at %.1f s into the load; leader's commit index %d; load %s\n",
		c.fol.id, c.restart.Seconds(), commit, loadavg())
	if err := g.start(slices.Index(g.members, c.fol)); err != nil {
		return err
	}
	if err := c.await(commit); err != nil {
		return err
	}
	c.watch(cfg.after, c.memAfter, "after")
	c.report()
	return nil
}

// fallBehind stops the follower and writes cfg.behind bytes of values
// through the leader.
func (c *catchup) fallBehind() error {
	fmt.Printf("leader member %d (%s); stopping follower member %d; load %s\n", c.lead.id, c.lead.addr, c.fol.id, loadavg())
	c.g.stopMember(slices.Index(c.g.members, c.fol))
	_, c0, _ := replication(c.lead.addr)
	n := c.cfg.behind / int64(c.cfg.valueSize)
	_, port, _ := strings.Cut(c.lead.addr, ":")
	args := []string{"-p", port, "-q", "--csv", "-t", "set", "-d", fmt.Sprint(c.cfg.valueSize), "-n", fmt.Sprint(n),
		"-r", fmt.Sprint(c.cfg.keyspace * 10), "-P", "16", "-c", "16"}
	t := time.Now()
	out, err := exec.Command("redis-benchmark", args...).Output()
	if err != nil {
		return fmt.Errorf("redis-benchmark %v: %w", args, err)
	}
	_, c1, _ := replication(c.lead.addr)
	fmt.Printf("wrote %d values of %d bytes (%.2f GiB) in %v: %s", n, c.cfg.valueSize,
		float64(n*int64(c.cfg.valueSize))/(1<<30), time.Since(t).Round(time.Millisecond), out)
	fmt.Printf("the follower is %d entries behind; leader's data directory %.2f GiB; peak RSS MiB so far (leader first) %.0f\n",
		c1-c0, float64(dirBytes(c.lead.dir))/(1<<30), peakRSS(c.g, slices.Index(c.g.members, c.lead)))
	return nil
}

// await polls the leader every 100 ms until the follower has caught up:
// its match index at least commit, and its lag no more than the other
// follower's. It follows the leadership if it moves.
func (c *catchup) await(commit uint64) error {
	for deadline := time.Now().Add(c.cfg.timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		m, idx, ok := replication(c.lead.addr)
		at := time.Since(c.ld.start)
		if !ok { // another member leads, or none yet
			c.progress = append(c.progress, fmt.Sprintf("%.1f,leader-lost,,,", at.Seconds()))
			if i, err := c.g.leader(5 * time.Second); err == nil && c.g.members[i] != c.lead {
				c.lead = c.g.members[i]
				c.changes++
				c.ld.follow(c.lead.addr)
				fmt.Printf("at %.1f s member %d leads\n", at.Seconds(), c.lead.id)
			}
			continue
		}
		if c.lead == c.fol {
			return fmt.Errorf("the restarted member %d became the leader: no catch-up to measure", c.fol.id)
		}
		other := c.g.members[3-slices.Index(c.g.members, c.lead)-slices.Index(c.g.members, c.fol)]
		f, o := m[c.fol.id], m[other.id]
		c.sample(at)
		c.progress = append(c.progress, fmt.Sprintf("%.1f,%d,%d,%d,%d", at.Seconds(), idx, f.match, f.lag, o.lag))
		if c.reach == 0 && f.match >= commit {
			c.reach = at
			fmt.Printf("member %d reached the restart's commit index %.2f s after its restart\n", c.fol.id, (at - c.restart).Seconds())
		}
		if c.reach != 0 && f.lag <= o.lag {
			c.level = at
			fmt.Printf("member %d no further behind than member %d %.2f s after its restart\n", c.fol.id, other.id, (at - c.restart).Seconds())
			return nil
		}
	}
	return fmt.Errorf("member %d did not catch up within %v; its log: %s.log", c.fol.id, c.cfg.timeout, c.fol.dir)
}

// sample records the members' memory every 5th poll and, with -pprof-base,
// saves their heap profiles every 20th.
func (c *catchup) sample(at time.Duration) {
	if len(c.progress)%5 == 0 {
		c.mem.sample(c.g)
	}
	if len(c.progress)%20 == 0 {
		c.saveHeaps(fmt.Sprintf("%03.0f", at.Seconds()))
	}
}

// watch samples the members' memory into p every 0.5 s for d, and then,
// with -pprof-base, saves their heap profiles, named for when.
func (c *catchup) watch(d time.Duration, p *peakMem, when string) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		p.sample(c.g)
	}
	c.saveHeaps(when)
}

// saveHeaps saves the members' heap profiles to -out, with -pprof-base.
func (c *catchup) saveHeaps(when string) {
	if pprofBase == 0 || c.cfg.out == "" {
		return
	}
	for _, s := range c.g.members {
		exec.Command("curl", "-s", "-o", filepath.Join(c.cfg.out, fmt.Sprintf("heap-m%d-%s.pb.gz", s.id, when)),
			fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap", pprofBase+s.id)).Run()
	}
}

// report stops the load and prints its throughput before, during and after
// the catch-up, the members' memory and the snapshot lines of their logs.
func (c *catchup) report() {
	end := time.Since(c.ld.start)
	c.ld.stop()
	fmt.Printf("load at the end %s; steady load's failed pipelines %d; leader changes %d\n", loadavg(), c.ld.errs.Load(), c.changes)
	for _, w := range []struct {
		name     string
		from, to time.Duration
	}{
		{"before the restart", time.Second, c.restart},
		{"during the catch-up", c.restart, c.level},
		{"after", c.level, end},
	} {
		ops, p99 := c.ld.window(w.from, w.to)
		fmt.Printf("%-20s %5.1f s  %9.0f ops/s  p99 pipeline %v\n", w.name, (w.to - w.from).Seconds(), ops, p99.Round(10*time.Microsecond))
	}
	fmt.Printf("peak RSS MiB (leader first): %.0f\nthe 10 s before the restart, sampled every 0.5 s:\n%s"+
		"during the catch-up, sampled every 0.5 s:\n%sthe %v after, sampled every 0.5 s:\n%s",
		peakRSS(c.g, slices.Index(c.g.members, c.lead)), c.memBefore, c.mem, c.cfg.after, c.memAfter)
	for _, s := range []*server{c.lead, c.fol} {
		fmt.Printf("member %d's log: %s\n", s.id, strings.Join(grepLog(s.dir+".log", "snapshot"), "\n  "))
	}
	if c.cfg.out == "" {
		return
	}
	csv := "t_s,commit,follower_match,follower_lag,other_lag\n" + strings.Join(c.progress, "\n") + "\n"
	os.WriteFile(filepath.Join(c.cfg.out, "catchup-progress.csv"), []byte(csv), 0o644)
	var b strings.Builder
	b.WriteString("t_s,ops_per_s\n")
	for i := range int(end / bucket) {
		fmt.Fprintf(&b, "%.1f,%d\n", float64(i)*bucket.Seconds(), c.ld.buckets[i].Load()*int64(time.Second/bucket))
	}
	os.WriteFile(filepath.Join(c.cfg.out, "catchup-throughput.csv"), []byte(b.String()), 0o644)
}

// grepLog returns the lines of a member's log that contain s.
func grepLog(path, s string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var v []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			v = append(v, sc.Text())
		}
	}
	return append([]string{""}, v...)
}
