// Package seedtest gives randomized tests a seed that they log and that a
// rerun can replay: `go test -run TestX -seed N`. It registers the -seed
// flag in the test binary of every package that imports it, and is
// imported only by tests.
package seedtest

import (
	"flag"
	"math/rand/v2"
	"testing"
)

var seed = flag.Uint64("seed", 0, "seed for the randomized tests (0: a random one, which they log)")

// Seed returns the -seed flag's value, or a random seed if it is 0, and
// logs it with the command that replays it.
func Seed(t testing.TB) uint64 {
	s := *seed
	if s == 0 {
		s = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -seed %d)", s, s)
	return s
}
