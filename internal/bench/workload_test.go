package bench

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"testing"

	"github.com/flintkv/flint/client"
)

// testGen returns worker i's generator for workload name with records
// records, 16-byte values and 4 workers.
func testGen(t *testing.T, name string, records int, seed uint64, i int) *opGen {
	t.Helper()
	w, err := findWorkload(name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := newChooserFactory(w.dist, records, DefaultTheta)
	if err != nil {
		t.Fatal(err)
	}
	return newOpGen(genParams{w: w, records: records, vsize: 16, scanMax: 100, seed: seed, workers: 4, choosers: f}, i)
}

// TestMixProportions checks that every workload generates its operation
// types in the proportions of its mix.
func TestMixProportions(t *testing.T) {
	const samples = 100_000
	for _, w := range workloads {
		t.Run(w.name, func(t *testing.T) {
			g := testGen(t, w.name, 10_000, 1, 0)
			var counts [numOpKinds]int
			for range samples {
				counts[g.next().kind]++
			}
			for k := range numOpKinds {
				got := float64(counts[k]) / samples
				// 4.5 standard deviations of a binomial proportion.
				if tol := 4.5 * math.Sqrt(w.mix[k]*(1-w.mix[k])/samples); math.Abs(got-w.mix[k]) > tol+1e-12 {
					t.Errorf("%s: share %.4f, want %.4f ± %.4f", k, got, w.mix[k], tol)
				}
			}
		})
	}
}

// TestDeterminism checks that a worker's operations depend only on the
// seed and its index.
func TestDeterminism(t *testing.T) {
	seq := func(name string, seed uint64, i int) []op {
		g := testGen(t, name, 10_000, seed, i)
		ops := make([]op, 1000)
		for j := range ops {
			ops[j] = g.next()
			ops[j].value = slices.Clone(ops[j].value)
		}
		return ops
	}
	eq := func(a, b []op) bool {
		return slices.EqualFunc(a, b, func(x, y op) bool {
			return x.kind == y.kind && x.key == y.key && x.scanLen == y.scanLen && string(x.value) == string(y.value)
		})
	}
	for _, name := range []string{"cs6450-a", "ycsb-d", "ycsb-e", "ycsb-f"} {
		if !eq(seq(name, 7, 1), seq(name, 7, 1)) {
			t.Errorf("%s: two generators of seed 7, worker 1 differ", name)
		}
		if eq(seq(name, 7, 1), seq(name, 7, 2)) {
			t.Errorf("%s: workers 1 and 2 of seed 7 generate the same operations", name)
		}
		if eq(seq(name, 7, 1), seq(name, 8, 1)) {
			t.Errorf("%s: seeds 7 and 8 generate the same operations", name)
		}
	}
}

func TestKeyFormat(t *testing.T) {
	for _, tc := range []struct {
		f    keyFormat
		n    uint64
		want string
	}{
		{decimalKeys, 0, "0"},
		{decimalKeys, 999999, "999999"},
		{userKeys, 0, "user0000000000"},
		{userKeys, 42, "user0000000042"},
		{userKeys, 9999999999, "user9999999999"},
	} {
		if got := tc.f.key(tc.n); got != tc.want {
			t.Errorf("key(%d) = %q, want %q", tc.n, got, tc.want)
		}
		if tc.f.key(tc.n) > tc.f.lastKey() {
			t.Errorf("key(%d) = %q sorts after lastKey %q", tc.n, tc.f.key(tc.n), tc.f.lastKey())
		}
	}
	// YCSB keys sort in numeric order, so a RANGE from a key scans the
	// keys numbered after it.
	nums := []uint64{5, 40, 300, 2000, 99999, 100000, 1234567}
	keys := make([]string, len(nums))
	for i, n := range nums {
		keys[i] = userKeys.key(n)
	}
	if !sort.StringsAreSorted(keys) {
		t.Errorf("user keys of increasing numbers are not in byte order: %v", keys)
	}
}

// TestScansAndInserts checks the scan lengths (uniform in [1, 100]) and
// that workers insert disjoint keys beyond the records.
func TestScansAndInserts(t *testing.T) {
	const records = 1000
	seen := make(map[string]int)
	lens := make(map[int]bool)
	for i := range 4 {
		g := testGen(t, "ycsb-e", records, 1, i)
		for range 20_000 {
			o := g.next()
			switch o.kind {
			case opScan:
				if o.scanLen < 1 || o.scanLen > 100 {
					t.Fatalf("scan length %d out of [1, 100]", o.scanLen)
				}
				lens[o.scanLen] = true
			case opInsert:
				n, _ := strconv.Atoi(o.key[len("user"):])
				if n < records {
					t.Fatalf("worker %d inserted %s, a loaded key", i, o.key)
				}
				if w, dup := seen[o.key]; dup {
					t.Fatalf("workers %d and %d both inserted %s", w, i, o.key)
				}
				seen[o.key] = i
			}
		}
	}
	if len(lens) != 100 {
		t.Errorf("%d distinct scan lengths, want all 100", len(lens))
	}
}

func TestWorkloadNames(t *testing.T) {
	for _, name := range []string{"cs6450-a", "cs6450-b", "cs6450-c", "ycsb-a", "ycsb-b", "ycsb-c", "ycsb-d", "ycsb-e", "ycsb-f"} {
		w, err := findWorkload(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var sum float64
		for _, f := range w.mix {
			sum += f
		}
		if math.Abs(sum-1) > 1e-12 {
			t.Errorf("%s: mix sums to %v", name, sum)
		}
	}
	if _, err := findWorkload("ycsb-g"); err == nil {
		t.Error("ycsb-g was found")
	}
}

// TestTxKeys checks that a tx or sets operation writes txWrites adjacent
// keys, the drawn one first, with a value of the configured size.
func TestTxKeys(t *testing.T) {
	for _, name := range []string{"tx-5", "sets-5"} {
		g := testGen(t, name, 1000, 1, 0)
		for range 100 {
			o := g.next()
			n, err := strconv.ParseUint(o.key, 10, 64)
			if err != nil || len(o.keys) != txWrites || len(o.value) != 16 {
				t.Fatalf("%s: op %+v", name, o)
			}
			for i, k := range o.keys {
				if want := strconv.FormatUint(n+uint64(i), 10); k != want {
					t.Fatalf("%s: keys %q, want them from %d up", name, o.keys, n)
				}
			}
		}
	}
}

// TestJudgeExec checks how EXEC's replies count: five OKs acknowledge the
// transaction; an error counts by its code, an aborted (nil) one as unexpected.
func TestJudgeExec(t *testing.T) {
	ok := client.Value{Kind: client.KindSimple, Str: []byte("OK")}
	five := client.Value{Kind: client.KindArray, Elems: []client.Value{ok, ok, ok, ok, ok}}
	abort := client.Value{Kind: client.KindError, Str: []byte("EXECABORT Transaction discarded because of previous errors.")}
	oom := five
	oom.Elems = append([]client.Value{{Kind: client.KindError, Str: []byte("OOM command not allowed")}}, ok, ok, ok, ok)
	for _, tc := range []struct {
		v    client.Value
		want string
	}{{five, ""}, {abort, "EXECABORT"}, {client.Value{Kind: client.KindNull}, errKindUnexpected}, {oom, "OOM"}} {
		if got := judgeExec(tc.v); got != tc.want {
			t.Errorf("judgeExec(%+v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
