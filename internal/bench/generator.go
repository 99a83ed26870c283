package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/flintkv/flint/internal/zipf"
)

// The request distributions: how a worker picks the key of a read, update,
// scan or read-modify-write. Inserts always take the worker's next new key.
const (
	distZipfian   = "zipfian"   // unscrambled: key 0 hottest (the cs6450 workload)
	distScrambled = "scrambled" // YCSB's "zipfian": ranks hashed over the keys
	distUniform   = "uniform"
	distLatest    = "latest" // zipfian over insertion order, newest hottest
)

var dists = []string{distZipfian, distScrambled, distUniform, distLatest}

func checkDist(dist string) error {
	if !slices.Contains(dists, dist) {
		return fmt.Errorf("%w: request distribution %q (want one of %v)", ErrConfig, dist, dists)
	}
	return nil
}

// keyChooser picks key numbers in [0, records) and, for "latest", among the
// keys its worker inserted. Each worker owns its own; it is not safe for
// concurrent use.
type keyChooser interface {
	next(rng *rand.Rand) uint64
}

// chooserFactory makes a worker's keyChooser. The constants that are costly
// to compute (zeta over a million keys) are computed once, by
// newChooserFactory, and shared read-only.
type chooserFactory struct {
	dist    string
	records int
	zipf    *zipf.Generator // for zipfian, scrambled and latest
}

func newChooserFactory(dist string, records int, theta float64) (*chooserFactory, error) {
	if err := checkDist(dist); err != nil {
		return nil, err
	}
	f := &chooserFactory{dist: dist, records: records}
	switch dist {
	case distZipfian, distLatest:
		f.zipf = zipf.New(records, theta)
	case distScrambled:
		// YCSB draws scrambled ranks from 10^10 items with a precomputed
		// zeta, valid for its theta only; other thetas draw from records.
		f.zipf = zipf.NewWithZeta(scrambledItems, scrambledTheta, scrambledZetan)
		if theta != scrambledTheta {
			f.zipf = zipf.New(records, theta)
		}
	}
	return f, nil
}

// chooser returns a new keyChooser reading ins for the latest keys.
func (f *chooserFactory) chooser(ins *insertSeq) keyChooser {
	switch f.dist {
	case distZipfian:
		return zipfChooser{f.zipf}
	case distScrambled:
		return scrambledChooser{z: f.zipf, n: uint64(f.records)}
	case distLatest:
		z := *f.zipf // grows with this worker's inserts
		return &latestChooser{z: &z, ins: ins}
	}
	return uniformChooser{n: uint64(f.records)}
}

// zipfChooser: key number i is rank i, key 0 the hottest.
type zipfChooser struct{ z *zipf.Generator }

func (c zipfChooser) next(rng *rand.Rand) uint64 { return uint64(c.z.Next(rng.Float64())) }

// scrambledChooser is YCSB's ScrambledZipfianGenerator: the hot ranks are
// hashed, so the hot keys lie anywhere in the key space, not at its start.
type scrambledChooser struct {
	z *zipf.Generator
	n uint64
}

func (c scrambledChooser) next(rng *rand.Rand) uint64 {
	return fnv64(uint64(c.z.Next(rng.Float64()))) % c.n
}

type uniformChooser struct{ n uint64 }

func (c uniformChooser) next(rng *rand.Rand) uint64 { return rng.Uint64N(c.n) }

// latestChooser is YCSB's SkewedLatestGenerator: zipfian over the keys in
// the order they were inserted, the newest the hottest.
type latestChooser struct {
	z   *zipf.Generator
	ins *insertSeq
}

func (c *latestChooser) next(rng *rand.Rand) uint64 {
	n := c.ins.count()
	c.z.Grow(n)
	return c.ins.key(n - 1 - c.z.Next(rng.Float64()))
}

// insertSeq numbers the keys one worker inserts. Workers insert disjoint
// keys without coordinating: the k-th insert of worker w of n gets key
// records + k*n + w. So every run of a seed inserts the same keys, and
// "latest" sees the keys its own worker inserted (whose acknowledgement,
// on one connection in order, precedes any later read of them).
type insertSeq struct {
	records  int
	worker   int
	workers  int
	inserted int
}

// count returns the number of keys in insertion order: the loaded records
// and this worker's inserts.
func (s *insertSeq) count() int { return s.records + s.inserted }

// key returns the key number of position i in insertion order.
func (s *insertSeq) key(i int) uint64 {
	if i < s.records {
		return uint64(i)
	}
	return uint64(s.records + (i-s.records)*s.workers + s.worker)
}

// insert returns the key number of the worker's next insert.
func (s *insertSeq) insert() uint64 {
	k := s.key(s.count())
	s.inserted++
	return k
}
