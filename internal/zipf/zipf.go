// Package zipf draws Zipf-distributed ranks the way YCSB does, for
// benchmarks and their tests.
package zipf

import "math"

// Generator draws ranks in [0, n) with P(rank i) proportional to 1/(i+1)^theta,
// rank 0 the most likely. It is the method of Gray et al., "Quickly
// Generating Billion-Record Synthetic Databases" (SIGMOD 1994), as YCSB's
// ZipfianGenerator implements it (zeta(n, theta), alpha, eta). It is not
// scrambled: rank i is key i, so key 0 is the hottest.
//
// The constants depend only on n and theta, so one Generator serves many
// goroutines, each bringing its own uniform numbers. Grow extends n (for
// YCSB's "latest" distribution) and must not race with Next.
type Generator struct {
	n       int
	theta   float64
	zetan   float64 // zeta(n, theta)
	zeta2   float64 // zeta(2, theta)
	alpha   float64 // 1 / (1 - theta)
	eta     float64 // (1 - (2/n)^(1-theta)) / (1 - zeta2/zetan)
	thresh1 float64 // 1 + 0.5^theta: u*zetan below it gives rank 1
}

// New returns a generator over n >= 1 ranks; theta is in (0, 1).
func New(n int, theta float64) *Generator {
	return NewWithZeta(n, theta, Zeta(0, n, theta, 0))
}

// NewWithZeta is New with zeta(n, theta) given, for n too large to
// sum (YCSB's scrambled generator draws from 10^10 ranks).
func NewWithZeta(n int, theta, zetan float64) *Generator {
	z := &Generator{
		n:       n,
		theta:   theta,
		zeta2:   Zeta(0, 2, theta, 0),
		alpha:   1 / (1 - theta),
		thresh1: 1 + math.Pow(0.5, theta),
	}
	z.setN(n, zetan)
	return z
}

// Zeta returns sum + the sum of 1/i^theta for i in from+1..to; with from 0
// and sum 0 it is zeta(to, theta), and it extends an earlier sum.
func Zeta(from, to int, theta, sum float64) float64 {
	for i := from + 1; i <= to; i++ {
		sum += 1 / math.Pow(float64(i), theta)
	}
	return sum
}

func (z *Generator) setN(n int, zetan float64) {
	z.n, z.zetan = n, zetan
	z.eta = (1 - math.Pow(2/float64(n), 1-z.theta)) / (1 - z.zeta2/zetan)
}

// Grow extends the generator to n ranks, adding the new terms to zeta as
// YCSB does when its item count increases. Smaller n are ignored.
func (z *Generator) Grow(n int) {
	if n > z.n {
		z.setN(n, Zeta(z.n, n, z.theta, z.zetan))
	}
}

// Next maps u, uniform in [0, 1), to a rank in [0, n).
func (z *Generator) Next(u float64) int {
	uz := u * z.zetan
	if uz < 1 {
		return 0
	}
	if uz < z.thresh1 {
		return 1
	}
	// YCSB leaves out the min: for u < 1 the product is below n, but
	// rounding may reach it.
	return min(int(float64(z.n)*math.Pow(z.eta*u-z.eta+1, z.alpha)), z.n-1)
}

// Zetan returns zeta(n, theta) for the generator's current n.
func (z *Generator) Zetan() float64 { return z.zetan }
