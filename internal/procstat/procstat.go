// Package procstat samples hardware metrics from Linux's /proc while a
// benchmark runs: for each named process (the driver, a local server) its CPU
// time and resident memory, and for the machine its CPU busy fraction and the
// bytes sent over the loopback interface.
//
// A Sampler reads once at Start, every interval after that, and once more at
// Stop, so its figures cover exactly the time between Start and Stop. Start
// one Sampler per phase to be measured (for example the run phase, not the
// load phase). Server efficiency, CPU time per operation, is
// Report.Procs["server"].CPUSeconds divided by the operations served.
//
// Sampling never fails the benchmark: a process that exits keeps what was
// sampled until then, and a /proc file that cannot be read or parsed is
// recorded in Report.Errors and skipped. Only Linux has these files;
// elsewhere the Report holds errors and processes that seem to have exited.
//
// Files read, and the fields used:
//
//	/proc/PID/stat   utime+stime (fields 14, 15), state (3), starttime (22)
//	/proc/PID/statm  resident pages (field 2), times the page size
//	/proc/stat       the "cpu" line: busy = all but idle and iowait
//	/proc/net/dev    interface "lo": receive and transmit bytes
//
// CPU times are in USER_HZ ticks, taken to be 100 per second (see
// clockTicks), so each reading of a process's CPU time is exact to 10 ms:
// per-sample rates over short intervals are coarse, totals over a run are not.
package procstat

import (
	"errors"
	"maps"
	"sync"
	"time"
)

// DefaultInterval is the sampling interval used when Start is given none.
const DefaultInterval = time.Second

// ErrTracked is returned by Track for a name that is already in use.
var ErrTracked = errors.New("procstat: process name already tracked")

// Sampler samples processes and the machine from Start until Stop. Its
// methods may be called from any goroutine.
type Sampler struct {
	interval time.Duration
	start    time.Time
	stop     chan struct{} // closed by Stop
	done     chan struct{} // closed by the sampling goroutine when it has taken its last reading

	// rec is owned by the sampling goroutine until done is closed, then by Stop.
	rec *recorder

	stopOnce sync.Once
	report   Report // set once by Stop

	mu struct {
		sync.Mutex
		pids map[string]int // name -> pid, read at every sample
	}
}

// Start takes a first reading and starts sampling every interval
// (DefaultInterval if interval <= 0) until Stop. pids names the processes to
// sample, for example {"driver": os.Getpid(), "server": serverPID}; entries
// with a pid <= 0 stand for an unknown process and are skipped. Start does not
// retain pids. The caller must call Stop, which ends the sampling goroutine.
func Start(interval time.Duration, pids map[string]int) *Sampler {
	return start("/proc", interval, pids)
}

// start is Start reading from root instead of /proc, for tests.
func start(root string, interval time.Duration, pids map[string]int) *Sampler {
	if interval <= 0 {
		interval = DefaultInterval
	}
	s := &Sampler{
		interval: interval,
		start:    time.Now(),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		rec:      newRecorder(root),
	}
	s.mu.pids = make(map[string]int)
	for name, pid := range pids {
		if pid > 0 {
			s.mu.pids[name] = pid
		}
	}
	s.sample()
	go s.run()
	return s
}

// Track adds a process started after Start, such as a spawned server. It is
// sampled from the next reading on, and its CPU time is counted from that
// reading. Track returns ErrTracked if name is already in use, and does
// nothing if pid <= 0 or after Stop.
func (s *Sampler) Track(name string, pid int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.mu.pids[name]; ok {
		return ErrTracked
	}
	if pid > 0 {
		s.mu.pids[name] = pid
	}
	return nil
}

// Stop takes a last reading, ends sampling and returns the Report. Later
// calls return the same Report. The caller owns the Report.
func (s *Sampler) Stop() Report {
	s.stopOnce.Do(func() {
		close(s.stop)
		<-s.done
		s.report = s.rec.report(s.interval)
	})
	return s.report
}

// run samples every interval until Stop, then once more.
func (s *Sampler) run() {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.sample()
		case <-s.stop:
			s.sample()
			return
		}
	}
}

// sample takes one reading of every tracked process and of the machine.
func (s *Sampler) sample() {
	s.mu.Lock()
	pids := maps.Clone(s.mu.pids)
	s.mu.Unlock()
	s.rec.sample(time.Since(s.start).Seconds(), pids)
}
