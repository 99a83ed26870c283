package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flintkv/flint/internal/proctest"
)

// TestCheckCommand runs `flint check` as a user would: a short run against
// a spawned server that passes and writes its history, a recheck of that
// history, and bad usage (hosted nodes included: internal/check's
// TestHostedConfig checks the messages).
func TestCheckCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs flint serve for a second")
	}
	out := t.TempDir()
	stdout, code := runFlint(t, flintBin, nil, "check", "--spawn", "--clients", "2", "--duration", "1s", "--out", out)
	if code != 0 || !strings.Contains(stdout, "result: PASS") {
		t.Fatalf("flint check: exit %d, want 0 and PASS:\n%s", code, stdout)
	}
	history := filepath.Join(out, "history.json")
	if _, err := os.Stat(history); err != nil {
		t.Fatalf("no history written: %v", err)
	}
	if stdout, code := runFlint(t, flintBin, nil, "check", "--recheck", history); code != 0 || !strings.Contains(stdout, "result: PASS") {
		t.Errorf("flint check --recheck: exit %d, want 0 and PASS:\n%s", code, stdout)
	}
	for _, args := range [][]string{
		{"--nemesis", "kill"},               // faults need --spawn
		{"--spawn", "--nemesis", "flood"},   // no such fault
		{"--spawn", "--mix", "get=1,put=1"}, // no such command
		{"--spawn", "extra"},
		{"--groups", "3"},                                                             // a sharded cluster needs --spawn
		{"--spawn", "--groups", "3", "--nemesis", "partition"},                        // group faults need replicated groups
		{"--hosted", "--nodes", "3", "--groups", "3"},                                 // hosted nodes need --spawn
		{"--spawn", "--hosted", "--nodes", "1", "--rf", "3", "--groups", "3"},         // fewer nodes than members
		{"--spawn", "--hosted", "--nodes", "1", "--groups", "3", "--nemesis", "wipe"}, // wipe needs replicated groups
		{"--spawn", "--groups", "3", "--managers", "2"},                               // a meta group of 2 has no majority of its own
		{"--spawn", "--managers", "3"},                                                // managers keep a sharded cluster's map
		{},                                                                            // neither --addr nor --spawn
	} {
		if stdout, code := runFlint(t, flintBin, nil, append([]string{"check"}, args...)...); code != 2 {
			t.Errorf("flint check %v: exit %d, want 2:\n%s", args, code, stdout)
		}
	}
}

// TestCheckCommandCatchesInjectedBug reproduces a bug the way
// docs/TESTING.md says: a binary built with -tags flintbugs, FLINT_BUGS set
// for `flint check`, which passes it on to the server it spawns.
func TestCheckCommandCatchesInjectedBug(t *testing.T) {
	if testing.Short() {
		t.Skip("runs flint serve for seconds")
	}
	bin := proctest.BuildTags(t, "flintbugs")
	stdout, code := runFlint(t, bin, []string{"FLINT_BUGS=stale-read"},
		"check", "--spawn", "--conflict", "--duration", "2s", "--out", t.TempDir())
	if code != 1 || !strings.Contains(stdout, "result: FAIL") {
		t.Fatalf("exit %d, want 1 and FAIL:\n%s", code, stdout)
	}
}

// runFlint runs bin with args and env added to the environment, and
// returns its standard output (and error) and exit status.
func runFlint(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return string(out), 0
}
