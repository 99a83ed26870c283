package bench

import (
	"fmt"
	"io"
	"time"
)

// Config is what to run: one run, a comparison of two targets or a sweep.
// The zero value of an optional setting takes its default.
type Config struct {
	Target     string   // flint://host:port, redis://host:port or null; empty with Spawn
	Spawn      bool     // start `flint serve` from this binary as the target
	SpawnArgs  []string // more arguments for the spawned server
	ServerPID  int      // pid of the target's server, for its CPU time; 0: unknown
	Compare    string   // a second target, run alternately with the first
	ComparePID int      // pid of the second target's server; 0: unknown
	Pairs      int      // A B pairs when comparing; at least MinPairs

	Workload     string  // cs6450-a|b|c or ycsb-a .. ycsb-f
	Distribution string  // request distribution, overriding the workload's
	Theta        float64 // zipfian constant; 0: DefaultTheta
	Records      int     // records loaded; 0: the workload's
	ValueSize    int     // bytes per value; 0: the workload's
	ScanLength   int     // longest scan; 0: DefaultScanLength

	Duration time.Duration // measured run time; 0: until Ops
	Ops      int64         // measured operations; 0: until Duration
	Warmup   time.Duration // run before measuring
	Workers  int           // goroutines, each with its own generator
	Pipeline int           // operations per batch, in flight at once per worker
	Conns    int           // client connections per target
	Rate     float64       // total intended operations per second; 0: closed loop
	Seed     uint64

	Sweep string // "param=v1,v2,...": one run per value; see sweepParams

	Out      string    // directory for the JSON result and plots; empty: none
	Command  string    // the command line, recorded in the result
	Stdout   io.Writer // the final tables and benchmark lines
	Progress io.Writer // the live progress line; nil: none
}

// Defaults of the optional settings.
const (
	DefaultTheta      = 0.99
	DefaultScanLength = 100 // YCSB's maxscanlength
	DefaultWorkers    = 16
	DefaultPipeline   = 1
	DefaultConns      = 2
	DefaultPairs      = 3
	MinPairs          = 3 // BENCHMARKING.md: the median of at least 3 pairs
	// maxLoadBytes bounds records*value size, so that a value-size sweep
	// with the default records does not try to load terabytes.
	maxLoadBytes = 8 << 30
)

// settings are the resolved values of one run; a sweep varies one of them.
type settings struct {
	w          workload
	dist       string
	theta      float64
	records    int
	valueSize  int
	scanLength int
	duration   time.Duration
	ops        int64
	warmup     time.Duration
	workers    int
	pipeline   int
	conns      int
	rate       float64
	seed       uint64
}

// resolve validates cfg and fills in the defaults.
func resolve(cfg Config) (settings, error) {
	w, err := findWorkload(cfg.Workload)
	if err != nil {
		return settings{}, err
	}
	s := settings{
		w: w, dist: or(cfg.Distribution, w.dist), theta: or(cfg.Theta, DefaultTheta),
		records: or(cfg.Records, w.records), valueSize: or(cfg.ValueSize, w.valueSize),
		scanLength: or(cfg.ScanLength, DefaultScanLength),
		duration:   cfg.Duration, ops: cfg.Ops, warmup: cfg.Warmup,
		workers: or(cfg.Workers, DefaultWorkers), pipeline: or(cfg.Pipeline, DefaultPipeline),
		conns: or(cfg.Conns, DefaultConns), rate: cfg.Rate, seed: cfg.Seed,
	}
	return s, s.check()
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// check reports the first invalid setting.
func (s settings) check() error {
	switch {
	case s.theta <= 0 || s.theta >= 1:
		return fmt.Errorf("%w: --theta %v must be in (0, 1)", ErrConfig, s.theta)
	case s.records < 1 || s.valueSize < 1 || s.scanLength < 1:
		return fmt.Errorf("%w: --records, --value-size and the scan length must be positive", ErrConfig)
	case s.duration < 0 || s.ops < 0 || s.warmup < 0 || s.rate < 0:
		return fmt.Errorf("%w: --duration, --ops, --warmup and --rate must not be negative", ErrConfig)
	case s.duration == 0 && s.ops == 0:
		return fmt.Errorf("%w: give --duration or --ops", ErrConfig)
	case s.workers < 1 || s.pipeline < 1 || s.conns < 1:
		return fmt.Errorf("%w: --workers, --pipeline and --conns must be at least 1", ErrConfig)
	case int64(s.records)*int64(s.valueSize) > maxLoadBytes:
		return fmt.Errorf("%w: loading %d records of %d bytes needs more than %d GiB; lower --records",
			ErrConfig, s.records, s.valueSize, maxLoadBytes>>30)
	}
	return checkDist(s.dist)
}

// check validates what resolve does not: the targets and the modes.
func (cfg Config) check() error {
	switch {
	case cfg.Spawn && cfg.Target != "":
		return fmt.Errorf("%w: give --spawn or --target, not both", ErrConfig)
	case !cfg.Spawn && cfg.Target == "":
		return fmt.Errorf("%w: give --target (flint://host:port, redis://host:port or null) or --spawn", ErrConfig)
	case cfg.Compare != "" && cfg.Sweep != "":
		return fmt.Errorf("%w: --compare and --sweep cannot be combined; sweep each target on its own", ErrConfig)
	case cfg.Compare != "" && or(cfg.Pairs, DefaultPairs) < MinPairs:
		return fmt.Errorf("%w: --pairs %d: a comparison needs at least %d pairs", ErrConfig, cfg.Pairs, MinPairs)
	}
	return nil
}

func (st settings) params() Params {
	return Params{Workers: st.workers, Pipeline: st.pipeline, Conns: st.conns, ValueSize: st.valueSize, Rate: st.rate}
}

func (st settings) genParams() (genParams, error) {
	f, err := newChooserFactory(st.dist, st.records, st.theta)
	return genParams{w: st.w, records: st.records, vsize: st.valueSize, scanMax: st.scanLength,
		seed: st.seed, workers: st.workers, choosers: f}, err
}

// plan returns the schedule of a run starting now.
func (st settings) plan(now time.Time) *plan {
	p := &plan{start: now, measure: now.Add(st.warmup), pipeline: st.pipeline, stopped: make(chan struct{})}
	if st.duration > 0 {
		p.deadline = p.measure.Add(st.duration)
	}
	if st.rate > 0 {
		p.interval = max(1, time.Duration(float64(time.Second)*float64(st.workers)/st.rate))
	}
	return p
}

// quota returns how many measured operations worker i sends: its share of
// --ops, or -1 for no limit.
func (st settings) quota(i int) int64 {
	if st.ops == 0 {
		return -1
	}
	q := st.ops / int64(st.workers)
	if int64(i) < st.ops%int64(st.workers) {
		q++
	}
	return q
}
