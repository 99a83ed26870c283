package difftest

import (
	"bytes"
	"net"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The redis-benchmark tests Flint passes: all those of the default list
// that need only strings.
const benchmarkTests = "ping_inline,ping_mbulk,set,get,incr,mset"

// progress matches redis-benchmark's report of a test in progress, such as
// "MSET (10 keys): rps=3139.4 (overall: 32833.3) avg_msec=0.075 (overall: 0.075)"
// (a rate may be "inf" or "nan").
var progress = regexp.MustCompile(`[A-Z_]+( \([^)]*\))?: rps=[^ )]+ \(overall: [^ )]+\) avg_msec=[^ )]+ \(overall: [^ )]+\)`)

// TestRedisBenchmark runs redis-benchmark's string tests against Flint and
// fails on any line of its output that is not a test's result: it prints
// the errors it gets ("Error from server: ...") and a warning when CONFIG
// GET fails.
func TestRedisBenchmark(t *testing.T) {
	path := tool(t, "FLINT_REDIS_BENCHMARK", "redis-benchmark")
	host, port, _ := net.SplitHostPort(startFlint(t))
	cmd := exec.Command(path, "-h", host, "-p", port, "-t", benchmarkTests, "-n", "2000", "-c", "4", "-q")
	out, err := runBounded(cmd)
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	done, problems := readBenchmark(string(out))
	for _, p := range problems {
		t.Errorf("redis-benchmark printed %q", p)
	}
	for _, test := range strings.Split(benchmarkTests, ",") {
		if !done[test] {
			t.Errorf("redis-benchmark gave no result for %s:\n%s", test, out)
		}
	}
}

// readBenchmark reads the output of redis-benchmark -q: the tests it gave
// a result for (by their -t names), and every other line it printed.
func readBenchmark(out string) (done map[string]bool, problems []string) {
	// Progress reports end in a carriage return, not a newline, so an error
	// may follow one on the same line: cut them out first.
	out = progress.ReplaceAllString(out, "")
	done = map[string]bool{}
	for _, line := range strings.FieldsFunc(out, func(r rune) bool { return r == '\n' || r == '\r' }) {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case strings.Contains(line, " requests per second, "):
			name, _, _ := strings.Cut(line, ":") // "SET" or "MSET (10 keys)"
			done[strings.ToLower(strings.Fields(name)[0])] = true
		default:
			problems = append(problems, line)
		}
	}
	return done, problems
}

func TestReadBenchmark(t *testing.T) {
	out := "PING_INLINE: rps=0.0 (overall: inf) avg_msec=0.116 (overall: 0.116)\r" +
		"PING_INLINE: 34482.76 requests per second, p50=0.063 msec\n\n" +
		"SET: rps=3139.4 (overall: 32833.3) avg_msec=0.075 (overall: 0.075)Error from server: ERR 'lpush' is not supported\n" +
		"MSET (10 keys): rps=nan (overall: nan) avg_msec=nan (overall: nan)\r                \r" +
		"MSET (10 keys): 13333.33 requests per second, p50=0.223 msec\n" +
		"WARNING: Could not fetch server CONFIG\n"
	done, problems := readBenchmark(out)
	if !done["ping_inline"] || !done["mset"] || len(done) != 2 {
		t.Errorf("done = %v, want ping_inline and mset", done)
	}
	want := []string{"Error from server: ERR 'lpush' is not supported", "WARNING: Could not fetch server CONFIG"}
	if !slices.Equal(problems, want) {
		t.Errorf("problems = %q, want %q", problems, want)
	}
}

// runBounded runs cmd and returns its output, killing it after liveness.
func runBounded(cmd *exec.Cmd) ([]byte, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	timer := time.AfterFunc(3*liveness, func() { cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	return out.Bytes(), err
}
