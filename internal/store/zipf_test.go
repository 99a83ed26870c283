package store

import (
	"math"
	"math/rand/v2"
	"testing"
)

// zipfian draws ranks in [0, n) with P(i) proportional to 1/(i+1)^theta,
// rank 0 the most likely. It is the method of Gray et al., "Quickly
// Generating Billion-Record Synthetic Databases" (SIGMOD 1994), as YCSB's
// ZipfianGenerator implements it, and it is not scrambled: rank i is key i,
// so key 0 is the hottest. It holds no state after construction; goroutines
// share one, each bringing its own uniform numbers.
type zipfian struct {
	n                 int
	zetan, alpha, eta float64
	thresh1           float64 // 1 + 0.5^theta: u*zetan below it gives rank 1
}

func newZipfian(n int, theta float64) *zipfian {
	zetan, zeta2 := zeta(n, theta), zeta(2, theta)
	return &zipfian{
		n:       n,
		zetan:   zetan,
		alpha:   1 / (1 - theta),
		eta:     (1 - math.Pow(2/float64(n), 1-theta)) / (1 - zeta2/zetan),
		thresh1: 1 + math.Pow(0.5, theta),
	}
}

// zeta returns the sum of 1/i^theta for i in 1..n.
func zeta(n int, theta float64) float64 {
	var sum float64
	for i := 1; i <= n; i++ {
		sum += 1 / math.Pow(float64(i), theta)
	}
	return sum
}

// next maps u, uniform in [0, 1), to a rank.
func (z *zipfian) next(u float64) int {
	uz := u * z.zetan
	if uz < 1 {
		return 0
	}
	if uz < z.thresh1 {
		return 1
	}
	return min(int(float64(z.n)*math.Pow(z.eta*u-z.eta+1, z.alpha)), z.n-1)
}

// TestZipfian checks the generator the benchmarks use against the
// distribution it approximates: the exact share of ranks 0 and 1 (about 6.5%
// and 3.3% for a million keys), and the share of the top 1000 keys and of the
// bottom half.
func TestZipfian(t *testing.T) {
	const n, samples = 1_000_000, 400_000
	z := newZipfian(n, 0.99)
	rng := rand.New(rand.NewPCG(7, 8))
	var r0, r1, top1000, bottomHalf int
	for range samples {
		r := z.next(rng.Float64())
		switch {
		case r < 0 || r >= n:
			t.Fatalf("rank %d out of [0, %d)", r, n)
		case r == 0:
			r0++
		case r == 1:
			r1++
		}
		if r < 1000 {
			top1000++
		}
		if r >= n/2 {
			bottomHalf++
		}
	}
	share := func(c int) float64 { return float64(c) / samples }
	near := func(what string, got, want, tol float64) {
		if math.Abs(got-want) > tol*want {
			t.Errorf("%s: share %.4f, want %.4f within %.0f%%", what, got, want, tol*100)
		}
	}
	near("rank 0", share(r0), 1/z.zetan, 0.03)
	near("rank 1", share(r1), math.Pow(2, -0.99)/z.zetan, 0.05)
	near("top 1000", share(top1000), zeta(1000, 0.99)/z.zetan, 0.05)
	near("bottom half", share(bottomHalf), (z.zetan-zeta(n/2, 0.99))/z.zetan, 0.05)
	if z.next(0) != 0 || z.next(math.Nextafter(1, 0)) != n-1 {
		t.Errorf("next(0) = %d, next(1-) = %d; want 0 and %d", z.next(0), z.next(math.Nextafter(1, 0)), n-1)
	}
}
