package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ycsbConfig configures the go-ycsb runs against a Flint group and an etcd
// group.
type ycsbConfig struct {
	bin, ycsb, etcd string
	out             string
	serve           []string
	workloads       []string // "a", "b"
	systems         []string // the first is compared with each other
	pairs           int
	threads         int
	records         int
	flintOps        int // operations per run against Flint
	etcdOps         int // and against etcd, so that both runs last about as long
}

// mixes are YCSB's core workloads A and B: 1,000-byte records of 10
// fields, zipfian requests; every read reads all fields and every update
// writes all fields, so that each operation is one request with either
// binding (go-ycsb's redis binding would read before a partial update).
var mixes = map[string]string{
	"a": "readproportion=0.5 updateproportion=0.5",
	"b": "readproportion=0.95 updateproportion=0.05",
}

// ycsbStat is one go-ycsb phase's figures.
type ycsbStat struct {
	System     string             `json:"system"`
	Workload   string             `json:"workload"`
	Label      string             `json:"label"`
	OpsPerSec  float64            `json:"ops_per_s"`
	P99Us      float64            `json:"p99_us"`
	P99ByOpUs  map[string]float64 `json:"p99_by_op_us"`
	Errors     int                `json:"errors"`
	CPUUsPerOp float64            `json:"cpu_us_per_op"` // every member's utime+stime per operation
	// ClientCPUUsPerOp is go-ycsb's own.
	ClientCPUUsPerOp float64 `json:"client_cpu_us_per_op"`
	LoadBefore       string  `json:"load_before"`
	LoadAfter        string  `json:"load_after"`
}

func (s ycsbStat) String() string {
	return fmt.Sprintf("%-3s %-6s ycsb-%s %9.0f ops/s  p99 %8.0f µs %v  errors %d  cpu/op %6.1f µs (client %5.1f)  load %s -> %s",
		s.Label, s.System, s.Workload, s.OpsPerSec, s.P99Us, s.P99ByOpUs, s.Errors, s.CPUUsPerOp, s.ClientCPUUsPerOp,
		s.LoadBefore, s.LoadAfter)
}

// runYCSB loads and runs each workload on a fresh Flint group of 3 and a
// fresh etcd group of 3, both driven by go-ycsb at their leader with the
// same threads, the two alternated pair by pair, the order swapped from one
// pair to the next.
func runYCSB(cfg ycsbConfig) error {
	var stats []ycsbStat
	for _, w := range cfg.workloads {
		if mixes[w] == "" {
			return fmt.Errorf("workload %q: want a or b", w)
		}
		st, err := ycsbWorkload(cfg, w)
		stats = append(stats, st...)
		if err != nil {
			return err
		}
	}
	return writeJSON(cfg.out, "ycsb.json", stats)
}

// system is one deployment that go-ycsb drives.
type system struct {
	name  string // flint (3 members), flint1 (a single node) or etcd (3 members)
	d     *deployment
	props []string // the binding, then its properties
	ops   int      // operations per run
}

func startSystem(cfg ycsbConfig, name, root string) (*system, error) {
	var d *deployment
	var err error
	switch name {
	case "flint":
		d, err = startGroup(cfg.bin, filepath.Join(root, name), 3, cfg.serve)
	case "flint1":
		d, err = startSingle(cfg.bin, filepath.Join(root, name), cfg.serve)
	case "etcd":
		d, err = startEtcd(cfg.etcd, filepath.Join(root, name), 3)
	default:
		return nil, fmt.Errorf("system %q: want flint, flint1 or etcd", name)
	}
	if err != nil {
		return nil, err
	}
	if name == "etcd" {
		i, err := etcdLeader(d)
		if err != nil {
			d.stop()
			return nil, err
		}
		return &system{name, d, []string{"etcd", "etcd.endpoints=" + d.members[i].addr}, cfg.etcdOps}, nil
	}
	i, err := d.leader(time.Minute)
	if err != nil {
		d.stop()
		return nil, err
	}
	return &system{name, d, []string{"redis", "redis.addr=" + d.members[i].addr, "redis.mode=single",
		"redis.datatype=string", fmt.Sprint("redis.pool_size=", cfg.threads)}, cfg.flintOps}, nil
}

func ycsbWorkload(cfg ycsbConfig, w string) ([]ycsbStat, error) {
	root, err := os.MkdirTemp("", "replbench-ycsb")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	var systems []*system
	for _, name := range cfg.systems {
		s, err := startSystem(cfg, name, root)
		if err != nil {
			return nil, err
		}
		defer s.d.stop()
		systems = append(systems, s)
	}
	if cfg.out != "" { // keep the members' logs
		defer func() {
			for _, s := range systems {
				for _, m := range s.d.members {
					b, _ := os.ReadFile(m.dir + ".log")
					os.WriteFile(filepath.Join(cfg.out, fmt.Sprintf("ycsb-%s-%s-%s.log", w, s.name, filepath.Base(m.dir))), b, 0o644)
				}
			}
		}()
	}
	var stats []ycsbStat
	for _, s := range systems {
		st, err := ycsbPhase(cfg, "load", w, s.name, "L", s.d, s.props, cfg.records)
		if err != nil {
			return stats, err
		}
		fmt.Println(st)
		stats = append(stats, st)
	}
	ratios := map[string][]float64{}
	for p := 1; p <= cfg.pairs; p++ {
		by := map[string]ycsbStat{}
		for k := range systems { // each pass starts one system later than the last
			s := systems[(k+p-1)%len(systems)]
			st, err := ycsbPhase(cfg, "run", w, s.name, fmt.Sprint("R", p), s.d, s.props, s.ops)
			if err != nil {
				return stats, err
			}
			fmt.Println(st)
			by[s.name] = st
			stats = append(stats, st)
		}
		for _, other := range systems[1:] {
			r := by[systems[0].name].OpsPerSec / by[other.name].OpsPerSec
			ratios[other.name] = append(ratios[other.name], r)
			fmt.Printf("pass %d: ycsb-%s %s/%s throughput %.2f, p99 %.0f / %.0f µs\n", p, w, systems[0].name, other.name, r,
				by[systems[0].name].P99Us, by[other.name].P99Us)
		}
	}
	for _, other := range systems[1:] {
		fmt.Printf("ycsb-%s: %s/%s throughput ratios %.2f, median %.2f\n", w, systems[0].name, other.name,
			ratios[other.name], median(ratios[other.name]))
	}
	return stats, nil
}

// ycsbPhase runs one go-ycsb phase ("load" or "run") and returns its figures.
func ycsbPhase(cfg ycsbConfig, phase, w, system, label string, d *deployment, props []string, ops int) (ycsbStat, error) {
	args := []string{phase, props[0], "-p", "workload=core", "-p", "requestdistribution=zipfian",
		"-p", "readallfields=true", "-p", "writeallfields=true", "-p", "insertproportion=0", "-p", "scanproportion=0",
		"-p", fmt.Sprint("recordcount=", cfg.records), "-p", fmt.Sprint("operationcount=", ops),
		"-p", fmt.Sprint("threadcount=", cfg.threads)}
	for _, kv := range append(strings.Fields(mixes[w]), props[1:]...) {
		args = append(args, "-p", kv)
	}
	st := ycsbStat{System: system, Workload: w, Label: label, LoadBefore: loadavg()}
	t0 := d.cpuTicks()
	cmd := exec.Command(cfg.ycsb, args...)
	out, err := cmd.CombinedOutput()
	t1 := d.cpuTicks()
	st.LoadAfter = loadavg()
	if cfg.out != "" {
		os.WriteFile(filepath.Join(cfg.out, fmt.Sprintf("ycsb-%s-%s-%s.txt", w, system, label)),
			append([]byte(cfg.ycsb+" "+strings.Join(args, " ")+"\n"), out...), 0o644)
	}
	if err != nil {
		return st, fmt.Errorf("%s %s: %w\n%s", cfg.ycsb, strings.Join(args, " "), err, out)
	}
	if err := parseYCSB(out, &st); err != nil {
		return st, err
	}
	st.CPUUsPerOp = float64(t1-t0) * 1e4 / float64(ops)
	st.ClientCPUUsPerOp = float64((cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Microseconds()) / float64(ops)
	return st, nil
}

// ycsbLine matches a line of go-ycsb's final summary, such as
// "READ   - Takes(s): 10.0, Count: 100, OPS: 10.0, Avg(us): ..., 99th(us): 123, ...".
var ycsbLine = regexp.MustCompile(`^([A-Z_]+)\s+- Takes\(s\): [0-9.]+, Count: (\d+), OPS: ([0-9.]+),.* 99th\(us\): (\d+),`)

// parseYCSB reads the summary go-ycsb prints after "Run finished".
func parseYCSB(out []byte, st *ycsbStat) error {
	i := bytes.LastIndex(out, []byte("Run finished"))
	if i < 0 {
		return fmt.Errorf("go-ycsb printed no summary:\n%s", out)
	}
	st.P99ByOpUs = map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out[i:]))
	for sc.Scan() {
		m := ycsbLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		count, _ := strconv.Atoi(m[2])
		ops, _ := strconv.ParseFloat(m[3], 64)
		p99, _ := strconv.ParseFloat(m[4], 64)
		switch {
		case m[1] == "TOTAL":
			st.OpsPerSec, st.P99Us = ops, p99
		case strings.HasSuffix(m[1], "_ERROR"):
			st.Errors += count
		default:
			st.P99ByOpUs[strings.ToLower(m[1])] = p99
		}
	}
	if st.OpsPerSec == 0 {
		return fmt.Errorf("go-ycsb's summary has no TOTAL line:\n%s", out[i:])
	}
	return nil
}

// startEtcd starts an etcd group of n members on loopback with etcd's
// default settings (a WAL fsynced before each commit), in fresh
// directories under root, and waits until it has a leader.
func startEtcd(bin, root string, n int) (*deployment, error) {
	d := &deployment{name: "etcd"}
	var peers []string
	for i := range n {
		s := &server{id: i + 1, addr: freeAddr(), dir: filepath.Join(root, fmt.Sprint("e", i+1))}
		peer := "http://" + freeAddr()
		peers = append(peers, fmt.Sprintf("e%d=%s", s.id, peer))
		s.argv = []string{bin, "--name", fmt.Sprint("e", s.id), "--data-dir", s.dir,
			"--listen-client-urls", "http://" + s.addr, "--advertise-client-urls", "http://" + s.addr,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster-state", "new", "--initial-cluster-token", "replbench", "--initial-cluster"}
		d.members = append(d.members, s)
	}
	for i, s := range d.members {
		s.argv = append(s.argv, strings.Join(peers, ","))
		if err := d.start(i); err != nil {
			d.stop()
			return nil, err
		}
	}
	if _, err := etcdLeader(d); err != nil {
		d.stop()
		return nil, err
	}
	return d, nil
}

// etcdLeader returns the index of the etcd member that leads, from
// `etcdctl endpoint status`.
func etcdLeader(d *deployment) (int, error) {
	var eps []string
	for _, s := range d.members {
		eps = append(eps, s.addr)
	}
	var last []byte
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		out, err := exec.Command("etcdctl", "--endpoints", strings.Join(eps, ","), "endpoint", "status", "-w", "json").Output()
		last = out
		if err != nil {
			continue
		}
		var st []struct {
			Endpoint string
			Status   struct {
				Header struct {
					MemberID uint64 `json:"member_id"`
				}
				Leader uint64
			}
		}
		if json.Unmarshal(out, &st) != nil {
			continue
		}
		for _, e := range st {
			if e.Status.Leader != 0 && e.Status.Header.MemberID == e.Status.Leader {
				for i, s := range d.members {
					if s.addr == e.Endpoint {
						return i, nil
					}
				}
			}
		}
	}
	return 0, fmt.Errorf("etcd: no leader within a minute: %s", last)
}
