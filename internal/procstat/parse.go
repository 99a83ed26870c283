package procstat

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat and of
// the counters in /proc/stat. Linux fixes it at 100 for user space on every
// architecture Go supports, whatever the kernel's CONFIG_HZ. Asking for it
// (sysconf(_SC_CLK_TCK)) would need cgo, which Flint does not use.
const clockTicks = 100

// ErrParse is wrapped by every error about a /proc file that could not be
// understood.
var ErrParse = errors.New("procstat: malformed /proc data")

// procStat is what one /proc/PID/stat line says about a process.
type procStat struct {
	state     byte   // R, S, D, Z (zombie), X (dead), ...
	cpuTicks  uint64 // utime + stime, in clockTicks
	startTime uint64 // clock ticks after boot; tells a reused pid from the original
}

// parseStat parses /proc/PID/stat. The command name, field 2, is in
// parentheses and may itself hold spaces and parentheses, so the fields are
// counted from the last ')'.
func parseStat(b []byte) (procStat, error) {
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("%w: stat: no ')' closing the command name", ErrParse)
	}
	// f[0] is field 3 (state) of proc(5), so field n is f[n-3].
	f := strings.Fields(s[i+1:])
	if len(f) < 22-3+1 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("%w: stat: %d fields after the command name, want at least 20", ErrParse, len(f))
	}
	n, err := parseUints(f[14-3], f[15-3], f[22-3])
	if err != nil {
		return procStat{}, fmt.Errorf("%w: stat: %v", ErrParse, err)
	}
	return procStat{state: f[0][0], cpuTicks: n[0] + n[1], startTime: n[2]}, nil
}

// parseStatm returns the resident set size, in pages, from /proc/PID/statm.
// It is the same figure as VmRSS in /proc/PID/status, which a zombie lacks.
func parseStatm(b []byte) (uint64, error) {
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, fmt.Errorf("%w: statm: %d fields, want at least 2", ErrParse, len(f))
	}
	n, err := parseUints(f[1])
	if err != nil {
		return 0, fmt.Errorf("%w: statm: %v", ErrParse, err)
	}
	return n[0], nil
}

// parseNetDev returns the bytes received and transmitted by iface from
// /proc/net/dev. After "name:" come 8 receive counters, bytes first, then 8
// transmit counters, bytes first; large counters may touch the colon.
func parseNetDev(b []byte, iface string) (rx, tx uint64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(name) != iface {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 9 {
			return 0, 0, fmt.Errorf("%w: net/dev: %s has %d counters, want 16", ErrParse, iface, len(f))
		}
		n, err := parseUints(f[0], f[8])
		if err != nil {
			return 0, 0, fmt.Errorf("%w: net/dev: %s: %v", ErrParse, iface, err)
		}
		return n[0], n[1], nil
	}
	return 0, 0, fmt.Errorf("%w: net/dev: no interface %q", ErrParse, iface)
}

// cpuTimes is the machine-wide CPU time from /proc/stat, in clockTicks.
type cpuTimes struct {
	busy, total uint64
	cores       int
}

// parseCPU parses the "cpu" line of /proc/stat (user nice system idle iowait
// irq softirq steal guest guest_nice) and counts the "cpuN" lines. Busy time
// is everything but idle and iowait; guest time is already inside user and
// nice, so the last two columns are left out of the total.
func parseCPU(b []byte) (cpuTimes, error) {
	var c cpuTimes
	var found bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 0 || !strings.HasPrefix(f[0], "cpu"):
		case f[0] == "cpu":
			t, err := parseCPULine(f[1:])
			if err != nil {
				return cpuTimes{}, err
			}
			c.busy, c.total, found = t.busy, t.total, true
		default:
			c.cores++
		}
	}
	if !found {
		return cpuTimes{}, fmt.Errorf("%w: stat: no cpu line", ErrParse)
	}
	return c, nil
}

// parseCPULine sums the columns after "cpu"; kernels before 2.6 have 4.
func parseCPULine(cols []string) (cpuTimes, error) {
	if len(cols) < 4 {
		return cpuTimes{}, fmt.Errorf("%w: stat: cpu line has %d columns, want at least 4", ErrParse, len(cols))
	}
	n, err := parseUints(cols[:min(len(cols), 8)]...)
	if err != nil {
		return cpuTimes{}, fmt.Errorf("%w: stat: cpu line: %v", ErrParse, err)
	}
	var c cpuTimes
	for i, v := range n {
		c.total += v
		if i != 3 && i != 4 { // idle, iowait
			c.busy += v
		}
	}
	return c, nil
}

// parseUints parses decimal counters.
func parseUints(s ...string) ([]uint64, error) {
	n := make([]uint64, len(s))
	for i, x := range s {
		v, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			return nil, err
		}
		n[i] = v
	}
	return n, nil
}
