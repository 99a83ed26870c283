package procstat

// Report summarizes a Sampler's run. All rates and means are over the time
// between readings actually taken, so a process tracked late or exited early
// is judged on the time it was watched.
type Report struct {
	IntervalSeconds float64 `json:"interval_s"`
	ElapsedSeconds  float64 `json:"elapsed_s"` // from Start to the last reading

	// Procs holds every tracked name, including those never readable.
	Procs map[string]ProcReport `json:"procs"`

	Cores int `json:"machine_cores"` // online CPUs, from /proc/stat
	// CPUBusy is the fraction [0, 1] of all cores' time spent not idle
	// (nor waiting for I/O), by any process.
	CPUBusy               float64 `json:"machine_cpu_busy"`
	LoopbackRxBytesPerSec float64 `json:"loopback_rx_bytes_per_s"`
	LoopbackTxBytesPerSec float64 `json:"loopback_tx_bytes_per_s"`

	// Samples is the time series, one per reading after the first; for plots.
	Samples []Sample `json:"samples"`

	// Errors holds the first distinct errors met while reading /proc (at
	// most maxErrors); ErrorCount counts them all, repeats included.
	Errors     []string `json:"errors,omitempty"`
	ErrorCount int      `json:"error_count"`
}

// ProcReport summarizes one process.
type ProcReport struct {
	PID int `json:"pid"`
	// CPUSeconds is the user+system CPU time used between the first and the
	// last reading of the process (its own threads, not its children).
	CPUSeconds float64 `json:"cpu_s"`
	// MeanCores is CPUSeconds divided by the seconds between those readings:
	// 1.0 is one core kept busy.
	MeanCores float64 `json:"mean_cores"`
	// PeakRSSBytes is the largest resident set size read; a peak that came
	// and went between two readings is missed.
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// Readings counts the successful readings; CPU figures need two.
	Readings int `json:"readings"`
	// Exited is set when the process was gone (or its pid reused, or it was
	// a zombie) at some reading; it was not read after that.
	Exited bool `json:"exited"`
}

// Sample is one reading. Rates are over the time since the previous reading.
type Sample struct {
	ElapsedSeconds float64 `json:"t_s"` // since Start
	// Procs holds each process read now and at least once before.
	Procs                 map[string]ProcSample `json:"procs"`
	CPUBusy               float64               `json:"machine_cpu_busy"` // fraction [0, 1]
	LoopbackRxBytesPerSec float64               `json:"loopback_rx_bytes_per_s"`
	LoopbackTxBytesPerSec float64               `json:"loopback_tx_bytes_per_s"`
}

// ProcSample is one reading of one process.
type ProcSample struct {
	CPUSeconds float64 `json:"cpu_s"` // CPU time used since its first reading
	Cores      float64 `json:"cores"` // CPU time per second since the previous reading
	RSSBytes   int64   `json:"rss_bytes"`
}
