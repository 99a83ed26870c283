package bench_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flintkv/flint/internal/bench"
	"github.com/flintkv/flint/internal/proctest"
)

// TestSpawnEndToEnd runs `flint bench --spawn` as a user would and checks
// its files, its counts, and that the server it started is gone.
func TestSpawnEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds flint and loads a million keys")
	}
	bin := proctest.Build(t)
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command(bin, "bench", "--spawn", "--workload", "cs6450-b", "--duration", "2s", "--out", out)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("flint bench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	var res bench.Result
	b, err := os.ReadFile(filepath.Join(out, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 1 {
		t.Fatalf("%d runs, want 1", len(res.Runs))
	}
	r := res.Runs[0]
	if r.Status != bench.StatusOK || !r.Spawned || r.Acknowledged == 0 || r.Issued != r.Acknowledged+r.Errors {
		t.Errorf("status %s, spawned %v: issued %d, acknowledged %d, errors %d", r.Status, r.Spawned, r.Issued, r.Acknowledged, r.Errors)
	}
	if r.Load == nil || r.Load.Records != 1_000_000 || r.ServerCPUNsPerOp <= 0 {
		t.Errorf("load %+v, server cpu %v ns/op; want a million records and the server's CPU", r.Load, r.ServerCPUNsPerOp)
	}
	if res.Config.Workload != "cs6450-b" || !strings.Contains(res.Command, "--spawn") {
		t.Errorf("config %+v, command %q", res.Config, res.Command)
	}
	if !strings.Contains(stdout.String(), "BenchmarkFlint/cs6450-b/target=flint\t") {
		t.Errorf("no benchmark line in the output")
	}
	for _, f := range []string{"bench.txt", "throughput.png", "latency-cdf.png", "cpu.png"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if err := syscall.Kill(r.ServerPID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("spawned server %d still there after flint bench exited (kill 0: %v)", r.ServerPID, err)
	}
}
