package procstat

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestSelf samples the test process while it burns CPU. It asserts only that
// something was measured, never how fast anything ran.
func TestSelf(t *testing.T) {
	s := Start(20*time.Millisecond, map[string]int{"self": os.Getpid(), "unknown": 0})
	burnCPU(t, 200*time.Millisecond, 5*time.Second)
	rep := s.Stop()

	self, ok := rep.Procs["self"]
	if !ok {
		t.Fatalf("no report for self: %+v", rep)
	}
	if self.CPUSeconds <= 0 || self.MeanCores <= 0 || self.PeakRSSBytes <= 0 || self.Exited {
		t.Errorf("self = %+v, want CPU, cores and RSS > 0, not exited", self)
	}
	if _, ok := rep.Procs["unknown"]; ok {
		t.Errorf("a pid of 0 was tracked: %+v", rep.Procs)
	}
	if len(rep.Samples) == 0 || rep.Cores < 1 || rep.CPUBusy <= 0 || rep.ErrorCount != 0 {
		t.Errorf("report = %+v, want samples, cores, busy CPU and no errors", rep)
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Errorf("report does not marshal: %v", err)
	}
}

// burnCPU spins until this process has used want CPU time, or for at most
// limit, whichever comes first.
func burnCPU(t *testing.T, want, limit time.Duration) {
	t.Helper()
	start := cpuTime(t)
	deadline := time.Now().Add(limit)
	for x := 0; cpuTime(t)-start < want && time.Now().Before(deadline); {
		for i := 0; i < 1e6; i++ {
			x += i
		}
	}
}

func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestExit tracks a child that exits, and is reaped, before Stop.
func TestExit(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	s := Start(time.Hour, map[string]int{"child": cmd.Process.Pid})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // killed: the error is expected
	rep := s.Stop()

	child := rep.Procs["child"]
	if !child.Exited || child.Readings != 1 || child.PeakRSSBytes <= 0 || child.PID != cmd.Process.Pid {
		t.Errorf("child = %+v, want exited after one reading", child)
	}
	if rep.ErrorCount != 0 {
		t.Errorf("errors: %v", rep.Errors)
	}
}

// TestFakeProc checks the arithmetic of a report on a fake /proc whose
// counters change between Start and Stop, a process added by Track, a pid
// that never existed, and files that cannot be parsed.
func TestFakeProc(t *testing.T) {
	root := t.TempDir()
	writeProc(t, root, 10, "100", "2560 0 0 0 0 0")
	writeFile(t, root, "stat", "cpu 100 0 0 100 0 0 0 0\ncpu0 100 0 0 100\n")
	writeFile(t, root, "net/dev", "lo: 1000 0 0 0 0 0 0 0 2000 0 0 0 0 0 0 0\n")

	s := start(root, time.Hour, map[string]int{"server": 10, "ghost": 999})
	writeProc(t, root, 10, "250", "1280 512 0 0 0 0") // 1.5 s more CPU, smaller RSS
	writeProc(t, root, 11, "7", "1 1 0")
	if err := s.Track("late", 11); err != nil {
		t.Fatal(err)
	}
	if err := s.Track("server", 12); !errors.Is(err, ErrTracked) {
		t.Errorf("Track(server) = %v, want ErrTracked", err)
	}
	writeFile(t, root, "stat", "cpu 175 0 0 125 0 0 0 0\ncpu0\ncpu1\n") // 75 of 100 ticks busy
	writeFile(t, root, "net/dev", "eth0: 1 0 0 0 0 0 0 0 2 0 0 0 0 0 0 0\n")
	rep := s.Stop()

	page := int64(os.Getpagesize())
	checkProc(t, rep, "server", ProcReport{PID: 10, CPUSeconds: 1.5, PeakRSSBytes: 512 * page, Readings: 2})
	checkProc(t, rep, "ghost", ProcReport{PID: 999, Exited: true})
	checkProc(t, rep, "late", ProcReport{PID: 11, PeakRSSBytes: page, Readings: 1})
	if rep.CPUBusy != 0.75 || rep.Cores != 2 {
		t.Errorf("machine CPU busy %v over %d cores, want 0.75 over 2", rep.CPUBusy, rep.Cores)
	}
	if rep.ErrorCount != 1 || len(rep.Errors) != 1 {
		t.Errorf("errors %d %q, want the missing loopback once", rep.ErrorCount, rep.Errors)
	}
	if len(rep.Samples) != 1 || rep.Samples[0].Procs["server"].CPUSeconds != 1.5 {
		t.Errorf("samples = %+v, want one, with server's 1.5 CPU seconds", rep.Samples)
	}
}

func TestFakeProcGarbage(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "10/stat", "garbage")
	s := start(root, time.Hour, map[string]int{"server": 10})
	rep := s.Stop()
	if rep.ErrorCount != 2*3 || len(rep.Errors) != 3 { // stat, net/dev, 10/stat at two readings
		t.Errorf("errors %d %q, want 6 of 3 kinds", rep.ErrorCount, rep.Errors)
	}
	if p := rep.Procs["server"]; p.Readings != 0 || p.Exited {
		t.Errorf("server = %+v, want no readings and not exited", p)
	}
	if again := s.Stop(); again.ErrorCount != rep.ErrorCount {
		t.Errorf("second Stop returned a different report")
	}
}

func checkProc(t *testing.T, rep Report, name string, want ProcReport) {
	t.Helper()
	got := rep.Procs[name]
	got.MeanCores = 0 // depends on the wall clock
	if got != want {
		t.Errorf("%s = %+v, want %+v", name, got, want)
	}
}

// writeProc writes a fake /proc/PID with the given utime and statm.
func writeProc(t *testing.T, root string, pid int, utime, statm string) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	writeFile(t, dir, "stat", "1 (fake proc) R 1 1 1 0 -1 0 0 0 0 0 "+utime+" 0 0 0 20 0 1 0 555 0 0")
	writeFile(t, dir, "statm", statm)
}

func writeFile(t *testing.T, root, name, content string) {
	t.Helper()
	p := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
