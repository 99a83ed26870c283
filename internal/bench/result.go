package bench

import (
	"math"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/flintkv/flint/internal/procstat"
)

// SchemaVersion is the version of the JSON result format described in the
// package documentation. It changes when a field changes meaning or goes.
const SchemaVersion = 1

// Result is the outcome of one `flint bench` invocation, as written to
// result.json.
type Result struct {
	Version int          `json:"version"`
	Command string       `json:"command"`
	Started time.Time    `json:"started"`
	Machine Machine      `json:"machine"`
	Config  ConfigRecord `json:"config"`
	Runs    []RunResult  `json:"runs"`
	Compare *Comparison  `json:"compare,omitempty"`
	Sweep   *Sweep       `json:"sweep,omitempty"`
}

// Machine describes where the driver ran.
type Machine struct {
	Hostname   string `json:"hostname"`
	CPUs       int    `json:"cpus"`
	CPUModel   string `json:"cpu_model"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	GoVersion  string `json:"go_version"`
}

// ConfigRecord is the configuration with every default filled in.
type ConfigRecord struct {
	Target       string             `json:"target"`
	Spawn        bool               `json:"spawn"`
	SpawnArgs    []string           `json:"spawn_args,omitempty"`
	ServerPID    int                `json:"server_pid,omitempty"`
	Compare      string             `json:"compare,omitempty"`
	ComparePID   int                `json:"compare_pid,omitempty"`
	Pairs        int                `json:"pairs,omitempty"`
	Workload     string             `json:"workload"`
	Mix          map[string]float64 `json:"mix"`
	Distribution string             `json:"distribution"`
	Theta        float64            `json:"theta"`
	Records      int                `json:"records"`
	ValueSize    int                `json:"value_size"`
	ScanLength   int                `json:"scan_length"`
	Duration     string             `json:"duration"`
	Ops          int64              `json:"ops"`
	Warmup       string             `json:"warmup"`
	Workers      int                `json:"workers"`
	Pipeline     int                `json:"pipeline"`
	Conns        int                `json:"conns"`
	Rate         float64            `json:"rate"`
	Seed         uint64             `json:"seed"`
	Sweep        string             `json:"sweep,omitempty"`
}

// The statuses of a run.
const (
	StatusOK          = "ok"
	StatusUnsupported = "unsupported" // the target lacks a command the workload needs
	StatusFailed      = "failed"      // a batch failed as a whole, or the target could not be reached
	StatusInterrupted = "interrupted" // stopped early by the user
)

// RunResult is one measurement of one target.
type RunResult struct {
	Label      string `json:"label,omitempty"` // "A" or "B" in a comparison, "workers=4" in a sweep
	Target     string `json:"target"`
	TargetKind string `json:"target_kind"` // flint, redis or null
	TargetName string `json:"target_name"` // the kind, with -A or -B if both targets are of one kind
	Spawned    bool   `json:"spawned"`
	ServerPID  int    `json:"server_pid,omitempty"`
	Params     Params `json:"params"`
	Status     string `json:"status"`
	Error      string `json:"error,omitempty"`

	Load *Load `json:"load,omitempty"` // nil when the target needed none

	Started        time.Time           `json:"started"`
	ElapsedSeconds float64             `json:"elapsed_s"` // measured time: from the end of the warm-up to the last reply
	WarmupOps      int64               `json:"warmup_ops"`
	Issued         int64               `json:"issued"` // Invariant: issued == acknowledged + errors
	Acknowledged   int64               `json:"acknowledged"`
	Errors         int64               `json:"errors"`
	ErrorsByKind   map[string]int64    `json:"errors_by_kind"`
	OpsPerSec      float64             `json:"ops_per_s"` // acknowledged per second
	Latency        Latency             `json:"latency"`   // every acknowledged operation
	CDF            []CDFPoint          `json:"cdf"`       // of every acknowledged operation
	Ops            map[string]OpResult `json:"ops"`       // by type: read, update, insert, scan, rmw

	Timeline  []TimePoint      `json:"timeline"`
	Resources *procstat.Report `json:"resources,omitempty"` // sampled during the measured time

	ServerCPUNsPerOp float64 `json:"server_cpu_ns_per_op,omitempty"` // server CPU time / operations; 0: unknown
	DriverCPUNsPerOp float64 `json:"driver_cpu_ns_per_op,omitempty"`
	// DriverOpsPerCoreSec is operations per second of driver CPU time: with
	// the null target, the driver's ceiling per core.
	DriverOpsPerCoreSec float64 `json:"driver_ops_per_core_s,omitempty"`
}

// Params are the settings a sweep may vary, as this run had them.
type Params struct {
	Workers   int     `json:"workers"`
	Pipeline  int     `json:"pipeline"`
	Conns     int     `json:"conns"`
	ValueSize int     `json:"value_size"`
	Rate      float64 `json:"rate"`
}

// Load is the load phase of a run.
type Load struct {
	Records   int     `json:"records"`
	ValueSize int     `json:"value_size"`
	Seconds   float64 `json:"seconds"`
	// Reused is set when an earlier run of the same invocation loaded the
	// same records into the target, which was not loaded again.
	Reused bool `json:"reused"`
}

// OpResult is what one type of operation measured.
type OpResult struct {
	Issued       int64      `json:"issued"`
	Acknowledged int64      `json:"acknowledged"`
	Errors       int64      `json:"errors"`
	OpsPerSec    float64    `json:"ops_per_s"`
	Latency      Latency    `json:"latency"`
	CDF          []CDFPoint `json:"cdf"`
}

// Latency summarizes a latency histogram, in nanoseconds.
type Latency struct {
	Count  int64   `json:"count"`
	MeanNs float64 `json:"mean_ns"`
	P50Ns  int64   `json:"p50_ns"`
	P90Ns  int64   `json:"p90_ns"`
	P99Ns  int64   `json:"p99_ns"`
	P999Ns int64   `json:"p99_9_ns"`
	MaxNs  int64   `json:"max_ns"`
}

// CDFPoint says that a fraction of the operations took at most Ns.
type CDFPoint struct {
	Ns       int64   `json:"ns"`
	Fraction float64 `json:"fraction"`
}

// TimePoint is the throughput over the second before T (warm-up included).
type TimePoint struct {
	T         float64 `json:"t_s"` // since the run phase began
	OpsPerSec float64 `json:"ops_per_s"`
}

// Comparison pairs the runs of two targets, A (--target or --spawn) and B
// (--compare), run alternately.
type Comparison struct {
	A      string `json:"a"`
	B      string `json:"b"`
	Pairs  []Pair `json:"pairs"`
	Median Ratios `json:"median"`
}

// Pair is one A run and the B run after it, as indices into Result.Runs.
type Pair struct {
	A      int    `json:"a"`
	B      int    `json:"b"`
	Ratios Ratios `json:"ratios"`
}

// Ratios are A's figures over B's; 0 where either is missing.
type Ratios struct {
	Throughput     float64 `json:"throughput"`
	P99            float64 `json:"p99"`
	ServerCPUPerOp float64 `json:"server_cpu_per_op"`
}

// Sweep lists the runs of a sweep, one per value of the parameter.
type Sweep struct {
	Param  string   `json:"param"`
	Values []string `json:"values"`
	Runs   []int    `json:"runs"` // indices into Result.Runs
}

// summarize reduces h to a Latency.
func summarize(h *hdrhistogram.Histogram) Latency {
	if h == nil || h.TotalCount() == 0 {
		return Latency{}
	}
	q := h.ValueAtPercentiles([]float64{50, 90, 99, 99.9})
	return Latency{Count: h.TotalCount(), MeanNs: h.Mean(), P50Ns: q[50], P90Ns: q[90], P99Ns: q[99], P999Ns: q[99.9], MaxNs: h.Max()}
}

// cdf samples h at fractions 1 - 10^(-k/20) for k = 0 .. 100, dense in the
// tail (0.9, 0.99, 0.999, ... each 20 points apart), and at 1, the maximum.
func cdf(h *hdrhistogram.Histogram) []CDFPoint {
	if h == nil || h.TotalCount() == 0 {
		return nil
	}
	pts := make([]CDFPoint, 0, 102)
	for k := range 101 {
		f := 1 - math.Pow(10, -float64(k)/20)
		pts = append(pts, CDFPoint{Ns: h.ValueAtQuantile(f * 100), Fraction: f})
	}
	return append(pts, CDFPoint{Ns: h.Max(), Fraction: 1})
}
