package store

import (
	"fmt"
	"sync"
	"testing"
)

// scanAll runs a scan from 0 to 0 with count, calling between(i) before
// call i, and returns how often each key was visited. It fails if the scan
// takes more than maxCalls calls.
func scanAll(t *testing.T, s *Store, count, maxCalls int, between func(i int)) map[string]int {
	t.Helper()
	seen := make(map[string]int)
	cursor := uint64(0)
	for i := 0; ; i++ {
		if i == maxCalls {
			t.Fatalf("scan not done after %d calls", maxCalls)
		}
		between(i)
		cursor = s.Scan(cursor, count, func(k string) { seen[k]++ })
		if cursor == 0 {
			return seen
		}
	}
}

func TestScanVisitsEveryKeyOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  Options
		n    int
	}{
		{"empty", Options{Stripes: 4}, 0},
		{"one stripe", Options{Stripes: 1}, 1000},
		{"many stripes", Options{Stripes: 16}, 5000},
		{"clashing hashes", Options{Stripes: 2, hashBits: 3}, 100},
		{"large tables", Options{Stripes: 2}, 20000}, // tables of many segments
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(tc.opt)
			for i := range tc.n {
				set(t, s, fmt.Sprintf("k%d", i), "v")
			}
			for _, count := range []int{1, 10, 1000} {
				if count == 1 && tc.n > 1000 {
					continue // a call looks at a whole segment: keep the test short
				}
				seen := scanAll(t, s, count, tc.n+100, func(int) {})
				if len(seen) != tc.n {
					t.Fatalf("COUNT %d: scan visited %d keys of %d", count, len(seen), tc.n)
				}
				for k, n := range seen {
					if n != 1 {
						t.Fatalf("COUNT %d: %s visited %d times", count, k, n)
					}
				}
			}
		})
	}
}

// TestScanWhileKeysChange scans while keys are added (growing the tables)
// and removed between calls: every key present all along is visited once.
func TestScanWhileKeysChange(t *testing.T) {
	s := New(Options{Stripes: 4})
	const stable = 2000
	for i := range stable {
		set(t, s, fmt.Sprintf("stable%d", i), "v")
		set(t, s, fmt.Sprintf("gone%d", i), "v")
	}
	seen := scanAll(t, s, 50, 10*stable, func(i int) {
		for j := range 20 {
			set(t, s, fmt.Sprintf("new%d-%d", i, j), "v")
		}
		do(t, s, OpDel, 0, fmt.Sprintf("gone%d", i))
	})
	for i := range stable {
		if k := fmt.Sprintf("stable%d", i); seen[k] != 1 {
			t.Fatalf("%s visited %d times", k, seen[k])
		}
	}
}

// TestScanConcurrentWrites scans while other goroutines write (run it
// with -race): the keys present all along are visited.
func TestScanConcurrentWrites(t *testing.T) {
	s := New(Options{Stripes: 8})
	const stable = 3000
	for i := range stable {
		set(t, s, fmt.Sprintf("stable%d", i), "v")
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := []byte(fmt.Sprintf("churn%d-%d", w, i%500))
				if i%3 == 0 {
					s.Apply(AppendEntry(nil, OpDel, 0, k))
				} else {
					s.Apply(AppendEntry(nil, OpSet, 0, k, k))
				}
			}
		}()
	}
	seen := scanAll(t, s, 20, 100*stable, func(int) {})
	close(stop)
	wg.Wait()
	for i := range stable {
		if k := fmt.Sprintf("stable%d", i); seen[k] != 1 {
			t.Fatalf("%s visited %d times", k, seen[k])
		}
	}
}

// TestScanAnyCursor checks that a cursor the store did not give (another
// process's) is a place to go on from, not an error or a hang.
func TestScanAnyCursor(t *testing.T) {
	s := New(Options{Stripes: 4})
	for i := range 100 {
		set(t, s, fmt.Sprintf("k%d", i), "v")
	}
	for _, c := range []uint64{1, 3, 1<<64 - 1, 1 << 63, 12345678901234567} {
		for i := 0; c != 0; i++ {
			if i > 200 {
				t.Fatalf("scan from %d not done", c)
			}
			c = s.Scan(c, 10, func(string) {})
		}
	}
}

// TestScanBounded: a scan of a store whose tables grew large and then lost
// their keys looks at a bounded number of segments a call, and still ends.
func TestScanBounded(t *testing.T) {
	s := New(Options{Stripes: 1, scanSegments: 2})
	const n = 5000 // about 8 segments
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "k%d", i)
		s.Put(keys[i], nil)
	}
	s.del(keys[1:])
	calls := 0
	seen := scanAll(t, s, 10, 100, func(int) { calls++ })
	if len(seen) != 1 || calls < 2 {
		t.Fatalf("scan visited %v in %d calls; want the one key left, in more than one call", seen, calls)
	}
}
