package bench

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/flintkv/flint/internal/zipf"
)

// draw returns how often each key number came up in n draws from c.
func draw(c keyChooser, n int, seed uint64) map[uint64]int {
	rng := rand.New(rand.NewPCG(seed, 0))
	counts := make(map[uint64]int)
	for range n {
		counts[c.next(rng)]++
	}
	return counts
}

// hottest returns the k key numbers drawn most often, most often first.
func hottest(counts map[uint64]int, k int) []uint64 {
	keys := make([]uint64, 0, len(counts))
	for key := range counts {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b uint64) int { return cmp.Or(counts[b]-counts[a], cmp.Compare(a, b)) })
	return keys[:min(k, len(keys))]
}

func near(t *testing.T, what string, got, want, relTol float64) {
	t.Helper()
	if math.Abs(got-want) > relTol*want {
		t.Errorf("%s = %.4f, want %.4f within %.0f%%", what, got, want, relTol*100)
	}
}

// TestZipfianCS6450 checks the cs6450 distribution (docs/BENCHMARKS.md): over a
// million keys with theta 0.99, key "0" takes about 6.5% of the draws and
// the top 1000 keys about half.
func TestZipfianCS6450(t *testing.T) {
	const n, samples = 1_000_000, 400_000
	f, err := newChooserFactory(distZipfian, n, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	counts := draw(f.chooser(nil), samples, 1)
	var top1000, bottomHalf int
	for k, c := range counts {
		if k >= n {
			t.Fatalf("key %d out of [0, %d)", k, n)
		}
		if k < 1000 {
			top1000 += c
		}
		if k >= n/2 {
			bottomHalf += c
		}
	}
	share := func(c int) float64 { return float64(c) / samples }
	z := f.zipf
	near(t, "share of key 0", share(counts[0]), 0.06497, 0.03)
	near(t, "share of key 0 (exact)", share(counts[0]), 1/z.Zetan(), 0.03)
	near(t, "share of key 1", share(counts[1]), math.Pow(2, -0.99)/z.Zetan(), 0.05)
	near(t, "share of the top 1000", share(top1000), 0.5021, 0.03)
	near(t, "share of the bottom half", share(bottomHalf), (z.Zetan()-zipf.Zeta(0, n/2, 0.99, 0))/z.Zetan(), 0.05)
	if got := hottest(counts, 3); !slices.Equal(got, []uint64{0, 1, 2}) {
		t.Errorf("hottest keys %v, want 0, 1, 2 (unscrambled)", got)
	}
	if z.Next(0) != 0 || z.Next(math.Nextafter(1, 0)) != n-1 {
		t.Errorf("next(0) = %d, next(1-) = %d; want 0 and %d", z.Next(0), z.Next(math.Nextafter(1, 0)), n-1)
	}
}

// TestScrambledSpreadsHotKeys checks YCSB's scrambled zipfian: as skewed
// as zipfian over 10^10 ranks (the hottest key about 1/26.47 of draws), but
// with the hot keys spread over the key space rather than at its start.
func TestScrambledSpreadsHotKeys(t *testing.T) {
	const n, samples = 100_000, 200_000
	f, err := newChooserFactory(distScrambled, n, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	counts := draw(f.chooser(nil), samples, 2)
	hot := hottest(counts, 20)
	near(t, "share of the hottest key", float64(counts[hot[0]])/samples, 1/scrambledZetan, 0.05)
	if want := fnv64(0) % n; hot[0] != want {
		t.Errorf("hottest key %d, want fnv64(0) %% n = %d", hot[0], want)
	}
	var low int // hot keys in the first tenth of the key space
	for _, k := range hot {
		if k < n/10 {
			low++
		}
	}
	if low > 8 {
		t.Errorf("%d of the 20 hottest keys are in the first tenth of the key space: %v", low, hot)
	}
}

// TestFNV64 checks the hash against YCSB's Utils.fnvhash64, computed with
// Java's long arithmetic.
func TestFNV64(t *testing.T) {
	for _, tc := range []struct{ in, want uint64 }{
		{0, 6284781860667377211},
		{1, 8517097267634966620},
		{2, 1820151046732198393},
		{42, 55488592825689361},
		{999999, 2744965632448235251},
		{9999999999, 3605131173811637474},
	} {
		if got := fnv64(tc.in); got != tc.want {
			t.Errorf("fnv64(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestUniformChiSquare checks the uniform distribution with Pearson's
// chi-square test over 100 equal buckets of keys.
func TestUniformChiSquare(t *testing.T) {
	const n, buckets, samples = 10_000, 100, 200_000
	f, err := newChooserFactory(distUniform, n, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	var obs [buckets]float64
	for k, c := range draw(f.chooser(nil), samples, 3) {
		obs[k/(n/buckets)] += float64(c)
	}
	var chi2 float64
	want := float64(samples) / buckets
	for _, o := range obs {
		chi2 += (o - want) * (o - want) / want
	}
	// The 99.9th percentile of chi-square with 99 degrees of freedom.
	if chi2 > 148.2 {
		t.Errorf("chi-square %.1f over %d buckets exceeds 148.2 (p < 0.001): not uniform", chi2, buckets)
	}
}

// TestLatestFavoursRecentInserts checks the latest distribution: after a
// worker inserts, its newest keys are the hottest, in order.
func TestLatestFavoursRecentInserts(t *testing.T) {
	const records, inserts, samples = 1000, 500, 100_000
	f, err := newChooserFactory(distLatest, records, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	ins := &insertSeq{records: records, worker: 1, workers: 4}
	c := f.chooser(ins)
	var last uint64
	for range inserts {
		last = ins.insert()
	}
	if want := uint64(records + (inserts-1)*4 + 1); last != want {
		t.Fatalf("last insert of worker 1 of 4 = %d, want %d", last, want)
	}
	counts := draw(c, samples, 4)
	want := []uint64{last, last - 4, last - 8}
	if got := hottest(counts, 3); !slices.Equal(got, want) {
		t.Errorf("hottest keys %v, want the newest inserts %v", got, want)
	}
	var recent int
	for k, n := range counts {
		if k >= records {
			recent += n
		}
	}
	z := zipf.New(records+inserts, 0.99)
	near(t, "share of the newest key", float64(counts[last])/samples, 1/z.Zetan(), 0.05)
	near(t, "share of the inserted keys", float64(recent)/samples, zipf.Zeta(0, inserts, 0.99, 0)/z.Zetan(), 0.05)
}
