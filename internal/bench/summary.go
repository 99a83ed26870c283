package bench

import "time"

// summarize fills in the counts, rates and latencies of r from what the
// workers measured over elapsed, and the CPU per operation from
// r.Resources.
func (r *RunResult) summarize(workers []*worker, elapsed time.Duration) {
	total := newWorkerStats(nil)
	for _, w := range workers {
		total.merge(w.stats)
	}
	secs := max(elapsed.Seconds(), 0)
	r.ElapsedSeconds, r.WarmupOps, r.ErrorsByKind = secs, total.warmup, total.errKinds
	r.Ops = make(map[string]OpResult)
	all := newHist()
	for k, o := range total.ops {
		if o.hist == nil {
			continue // not in the workload
		}
		r.Issued += o.issued
		r.Acknowledged += o.acked
		r.Errors += o.errors
		r.Ops[opKind(k).String()] = OpResult{Issued: o.issued, Acknowledged: o.acked, Errors: o.errors,
			OpsPerSec: rate(o.acked, secs), Latency: summarize(o.hist), CDF: cdf(o.hist)}
		all.Merge(o.hist)
	}
	r.OpsPerSec = rate(r.Acknowledged, secs)
	r.Latency, r.CDF = summarize(all), cdf(all)
	r.cpuPerOp()
}

func rate(n int64, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return float64(n) / secs
}

// cpuPerOp derives the CPU figures from the sampled CPU time of the driver
// and the server, over the operations completed while they were sampled.
func (r *RunResult) cpuPerOp() {
	ops := float64(r.Issued)
	if r.Resources == nil || ops == 0 {
		return
	}
	if p, ok := r.Resources.Procs["server"]; ok && p.Readings >= 2 {
		r.ServerCPUNsPerOp = p.CPUSeconds * 1e9 / ops
	}
	if p, ok := r.Resources.Procs["driver"]; ok && p.Readings >= 2 && p.CPUSeconds > 0 {
		r.DriverCPUNsPerOp = p.CPUSeconds * 1e9 / ops
		r.DriverOpsPerCoreSec = ops / p.CPUSeconds
	}
}
