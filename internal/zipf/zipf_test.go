package zipf

import (
	"math"
	"testing"
)

// TestZipfianGrow checks that growing a generator gives the constants of
// one built at the larger size.
func TestZipfianGrow(t *testing.T) {
	z := New(1000, 0.99)
	z.Grow(5000)
	want := New(5000, 0.99)
	if math.Abs(z.zetan-want.zetan) > 1e-9 || math.Abs(z.eta-want.eta) > 1e-9 || z.n != want.n {
		t.Errorf("grown: n %d zetan %v eta %v; built: n %d zetan %v eta %v", z.n, z.zetan, z.eta, want.n, want.zetan, want.eta)
	}
	z.Grow(10) // never shrinks
	if z.n != 5000 {
		t.Errorf("grow(10) shrank n to %d", z.n)
	}
}
