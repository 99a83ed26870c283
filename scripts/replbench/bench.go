package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// cpuSample is the summed CPU ticks of a deployment's members at a time.
type cpuSample struct {
	at    time.Time
	ticks int64
}

// sampler records a deployment's CPU ticks every interval, so that the CPU
// of a run that another program timed can be read off afterwards.
type sampler struct {
	mu      sync.Mutex
	samples []cpuSample
	stop    chan struct{}
	done    chan struct{}
}

func startSampler(d *deployment, every time.Duration) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s.mu.Lock()
			s.samples = append(s.samples, cpuSample{time.Now(), d.cpuTicks()})
			s.mu.Unlock()
			select {
			case <-t.C:
			case <-s.stop:
				return
			}
		}
	}()
	return s
}

func (s *sampler) end() { close(s.stop); <-s.done }

// ticksAt returns the ticks at t, interpolated between the samples around it.
func (s *sampler) ticksAt(t time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.samples
	if len(v) == 0 {
		return 0
	}
	for i := 1; i < len(v); i++ {
		if !v[i].at.Before(t) {
			a, b := v[i-1], v[i]
			f := float64(t.Sub(a.at)) / float64(b.at.Sub(a.at))
			return float64(a.ticks) + max(0, min(1, f))*float64(b.ticks-a.ticks)
		}
	}
	return float64(v[len(v)-1].ticks)
}

// benchRun is the part of a run in flint bench's result.json used here.
type benchRun struct {
	Label     string    `json:"label"`
	Target    string    `json:"target"`
	Started   time.Time `json:"started"`
	Elapsed   float64   `json:"elapsed_s"`
	Issued    float64   `json:"issued"`
	OpsPerSec float64   `json:"ops_per_s"`
	Latency   struct {
		P50 float64 `json:"p50_ns"`
		P99 float64 `json:"p99_ns"`
	} `json:"latency"`
	ServerCPUNsPerOp float64 `json:"server_cpu_ns_per_op"`
}

// runBench starts a group and a single node once and runs `flint bench`
// with the group's leader as --target and the single node as --compare, so
// that flint bench alternates them; it adds the CPU of the whole group per
// operation, which flint bench, given one pid, cannot know.
func runBench(cfg abConfig) error {
	root, err := os.MkdirTemp("", "replbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	g, err := startGroup(cfg.bin, root, cfg.members, cfg.serve)
	if err != nil {
		return err
	}
	defer g.stop()
	s, err := startSingle(cfg.bin, root, cfg.serve)
	if err != nil {
		return err
	}
	defer s.stop()
	li, err := g.leader(time.Minute)
	if err != nil {
		return err
	}
	lead, single := g.members[li], s.members[0]
	out := cfg.out
	if out == "" {
		if out, err = os.MkdirTemp("", "replbench-out"); err != nil {
			return err
		}
		defer os.RemoveAll(out)
	}
	args := append([]string{"bench", "--target", "redis://" + lead.addr, "--server-pid", fmt.Sprint(lead.cmd.Process.Pid),
		"--compare", "redis://" + single.addr, "--compare-pid", fmt.Sprint(single.cmd.Process.Pid),
		"--out", filepath.Join(out, "bench")}, cfg.load[1:]...)
	fmt.Printf("load %s; %s %v\n", loadavg(), cfg.bin, args)
	gs, ss := startSampler(g, 100*time.Millisecond), startSampler(s, 100*time.Millisecond)
	cmd := exec.Command(cfg.bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err = cmd.Run()
	gs.end()
	ss.end()
	fmt.Printf("load after: %s\n", loadavg())
	if err != nil {
		return fmt.Errorf("flint bench: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(out, "bench", "result.json"))
	if err != nil {
		return err
	}
	var res struct{ Runs []benchRun }
	if err := json.Unmarshal(b, &res); err != nil {
		return err
	}
	var stats []runStat
	for _, r := range res.Runs {
		d, smp := s, ss
		if r.Target == "redis://"+lead.addr {
			d, smp = g, gs
		}
		end := r.Started.Add(time.Duration(r.Elapsed * float64(time.Second)))
		st := runStat{Deployment: d.name, Label: r.Label, OpsPerSec: r.OpsPerSec, P50Ms: r.Latency.P50 / 1e6,
			P99Ms: r.Latency.P99 / 1e6, Seconds: r.Elapsed, Ops: r.Issued,
			CPUUsPerOp:       (smp.ticksAt(end) - smp.ticksAt(r.Started)) * 1e4 / r.Issued,
			LeaderCPUUsPerOp: r.ServerCPUNsPerOp / 1e3}
		stats = append(stats, st)
	}
	li2, _ := g.leader(time.Second)
	fmt.Printf("peak RSS MiB: group (leader first) %v, single %v\n", peakRSS(g, li2), peakRSS(s, 0))
	for _, st := range stats {
		fmt.Println(st)
	}
	return writeJSON(cfg.out, "runs.json", stats)
}
