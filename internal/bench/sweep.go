package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
)

// sweepParams are the settings --sweep can vary, and how each value is set.
var sweepParams = map[string]func(st *settings, v string) error{
	"workers":    func(st *settings, v string) error { return setInt(&st.workers, v) },
	"pipeline":   func(st *settings, v string) error { return setInt(&st.pipeline, v) },
	"conns":      func(st *settings, v string) error { return setInt(&st.conns, v) },
	"value-size": func(st *settings, v string) error { return setInt(&st.valueSize, v) },
	"rate": func(st *settings, v string) (err error) {
		st.rate, err = strconv.ParseFloat(v, 64)
		return err
	},
}

func setInt(p *int, v string) (err error) {
	*p, err = strconv.Atoi(v)
	return err
}

// sweepPlan is a parsed --sweep: the settings of each run, in order.
type sweepPlan struct {
	param  string
	values []string
	runs   []settings
}

// parseSweep parses "param=v1,v2,..." into the settings of each run, base
// with param set to each value. An empty spec is no sweep.
func parseSweep(spec string, base settings) (*sweepPlan, error) {
	if spec == "" {
		return nil, nil
	}
	param, list, _ := strings.Cut(spec, "=")
	set, ok := sweepParams[param]
	if !ok || list == "" {
		return nil, fmt.Errorf("%w: --sweep %q: want PARAM=V1,V2,... with PARAM one of workers, pipeline, conns, value-size, rate", ErrConfig, spec)
	}
	sw := &sweepPlan{param: param}
	for _, v := range strings.Split(list, ",") {
		st := base
		if err := set(&st, strings.TrimSpace(v)); err != nil {
			return nil, fmt.Errorf("%w: --sweep %s: value %q: %w", ErrConfig, param, v, err)
		}
		if err := st.check(); err != nil {
			return nil, fmt.Errorf("--sweep %s=%s: %w", param, v, err)
		}
		sw.values = append(sw.values, strings.TrimSpace(v))
		sw.runs = append(sw.runs, st)
	}
	return sw, nil
}

// sweep runs t once per value of the swept parameter.
func (s *session) sweep(ctx context.Context, res *Result, t *target, sw *sweepPlan) {
	res.Sweep = &Sweep{Param: sw.param, Values: sw.values}
	for i, st := range sw.runs {
		if ctx.Err() != nil {
			break
		}
		r := s.measure(ctx, t, st, sw.param+"="+sw.values[i])
		res.Runs = append(res.Runs, r)
		res.Sweep.Runs = append(res.Sweep.Runs, len(res.Runs)-1)
		s.printShort(r)
	}
	s.printSweep(res)
}

// printSweep prints one row per run of the sweep.
func (s *session) printSweep(res *Result) {
	sw := res.Sweep
	if len(sw.Runs) == 0 {
		return // interrupted before the first run
	}
	fmt.Fprintf(s.stdout, "\n%s on %s, sweeping %s (otherwise %s)\n", s.base.w.name, res.Runs[0].Target, sw.Param, s.describe(s.base.params()))
	tw := tabwriter.NewWriter(s.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tops/s\tp50\tp90\tp99\tp99.9\tmax\tserver cpu/op\terrors\tstatus\t\n", sw.Param)
	for i, ri := range sw.Runs {
		r := res.Runs[ri]
		fmt.Fprintf(tw, "%s\t%.0f\t%s%s\t%d\t%s\t\n", sw.Values[i], r.OpsPerSec, latencyCells(r.Latency), fmtCPU(r.ServerCPUNsPerOp), r.Errors, r.Status)
	}
	tw.Flush()
}
