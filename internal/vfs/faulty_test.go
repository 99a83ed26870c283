package vfs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

var _ FS = (*Faulty)(nil)

var errInjected = errors.New("injected")

func TestFaultyPassesThrough(t *testing.T) {
	m := NewMem()
	must(t, MkdirAll(m, "d"))
	testFS(t, NewFaulty(m), "d")
	testFS(t, NewFaulty(OS), t.TempDir())
}

// faultyWrite is a WriteAt through a Faulty and what it should return.
type faultyWrite struct {
	name  string // file in d
	s     string
	wantN int
	fail  bool // whether it should fail with errInjected
}

func TestFaultyWrites(t *testing.T) {
	for _, tc := range []struct {
		name   string
		arm    func(f *Faulty)
		writes []faultyWrite
	}{{
		name:   "no fault",
		arm:    func(f *Faulty) {},
		writes: []faultyWrite{{"a", "hello", 5, false}},
	}, {
		name: "FailWrite",
		arm:  func(f *Faulty) { f.FailWrite(errInjected) },
		writes: []faultyWrite{
			{"a", "hello", 0, true},
			{"b", "x", 0, true},
		},
	}, {
		name: "FailAfterBytes",
		arm:  func(f *Faulty) { f.FailAfterBytes(5, errInjected) },
		writes: []faultyWrite{
			{"a", "abc", 3, false},
			{"b", "defg", 2, true}, // crosses the limit
			{"a", "h", 0, true},
			{"b", "", 0, false},
		},
	}, {
		name: "FailAfterBytes exactly",
		arm:  func(f *Faulty) { f.FailAfterBytes(3, errInjected) },
		writes: []faultyWrite{
			{"a", "abc", 3, false},
			{"a", "d", 0, true},
		},
	}, {
		name: "FailAfterBytes zero",
		arm:  func(f *Faulty) { f.FailAfterBytes(0, errInjected) },
		writes: []faultyWrite{
			{"a", "abc", 0, true},
		},
	}, {
		name: "FailWrite filtered",
		arm: func(f *Faulty) {
			f.SetFilter(func(name string) bool { return strings.HasSuffix(name, ".log") })
			f.FailWrite(errInjected)
		},
		writes: []faultyWrite{
			{"a", "abc", 3, false},
			{"x.log", "abc", 0, true},
		},
	}, {
		name: "FailAfterBytes counts filtered files only",
		arm: func(f *Faulty) {
			f.SetFilter(func(name string) bool { return name == "d/x.log" })
			f.FailAfterBytes(2, errInjected)
		},
		writes: []faultyWrite{
			{"a", "abcdef", 6, false},
			{"x.log", "abc", 2, true},
			{"a", "ghi", 3, false},
		},
	}, {
		name: "Heal",
		arm: func(f *Faulty) {
			f.FailWrite(errInjected)
			f.FailAfterBytes(0, errInjected)
			f.Heal()
		},
		writes: []faultyWrite{{"a", "hello", 5, false}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMem()
			must(t, MkdirAll(m, "d"))
			f := NewFaulty(m)
			tc.arm(f)
			want := map[string]string{}
			for _, w := range tc.writes {
				must(t, m.WriteFile("d/"+w.name, nil))
			}
			for _, w := range tc.writes {
				name := "d/" + w.name
				file, err := f.OpenRW(name)
				must(t, err)
				off := int64(len(want[w.name]))
				n, err := file.WriteAt([]byte(w.s), off)
				if n != w.wantN || errors.Is(err, errInjected) != w.fail || !w.fail && err != nil {
					t.Fatalf("WriteAt(%q) to %s = %d, %v; want %d, fail %v", w.s, name, n, err, w.wantN, w.fail)
				}
				must(t, file.Close())
				want[w.name] += w.s[:n]
				if b, _ := m.ReadFile(name); string(b) != want[w.name] {
					t.Fatalf("%s holds %q, want %q", name, b, want[w.name])
				}
			}
		})
	}
}

func TestFaultySync(t *testing.T) {
	m := NewMem()
	must(t, MkdirAll(m, "d"))
	f := NewFaulty(m)
	file, err := f.Create("d/a")
	must(t, err)
	_, err = file.WriteAt([]byte("hello"), 0)
	must(t, err)
	must(t, f.SyncDir("d"))

	f.FailSync(errInjected)
	if err := file.Sync(); !errors.Is(err, errInjected) {
		t.Fatalf("Sync with FailSync = %v", err)
	}
	f.SetFilter(func(name string) bool { return name == "d/other" })
	must(t, file.Sync())
	if n := f.Syncs(); n != 1 {
		t.Fatalf("Syncs() = %d, want 1", n)
	}
	f.SetFilter(nil)

	f.FailSyncDir(errInjected)
	other, err := f.Create("d/b")
	must(t, err)
	must(t, other.Close())
	if err := f.SyncDir("d"); !errors.Is(err, errInjected) {
		t.Fatalf("SyncDir with FailSyncDir = %v", err)
	}
	_, err = file.WriteAt([]byte(" world"), 5)
	must(t, err)
	if err := file.Sync(); !errors.Is(err, errInjected) {
		t.Fatalf("Sync with FailSync and FailSyncDir = %v", err)
	}

	// The failed syncs synced nothing, and the one between them did not
	// write the bytes the first failed to: only the size they left.
	m.Crash()
	if got := contents(t, m); !equalMaps(got, map[string]string{"a": "\x00\x00\x00\x00\x00"}) {
		t.Fatalf("after Crash: %q", got)
	}
	f.Heal()
	must(t, f.SyncDir("d"))
	if n := f.Syncs(); n != 1 {
		t.Fatalf("Syncs() = %d, want 1", n)
	}
}

// TestFaultyMkdir fails the Mkdirs of the directories the filter accepts,
// until Heal.
func TestFaultyMkdir(t *testing.T) {
	f := NewFaulty(NewMem())
	f.SetFilter(func(name string) bool { return name == "d/sub" })
	f.FailMkdir(errInjected)
	if err := MkdirAll(f, "d/sub"); !errors.Is(err, errInjected) {
		t.Fatalf("MkdirAll with FailMkdir = %v", err)
	}
	if _, err := f.ReadDir("d/sub"); err == nil {
		t.Fatal("the failed Mkdir made d/sub")
	}
	must(t, MkdirAll(f, "d/other"))
	f.Heal()
	must(t, MkdirAll(f, "d/sub"))
}

func TestFaultyPassesErrorsOn(t *testing.T) {
	m := NewMem()
	must(t, MkdirAll(m, "d"))
	m.SetCapacity(4)
	f := NewFaulty(m)
	f.FailAfterBytes(6, errInjected)
	file, err := f.Create("d/a")
	must(t, err)
	// The Mem's ENOSPC wins over the budget's error.
	if n, err := file.WriteAt([]byte("abcdefgh"), 0); n != 4 || !IsNoSpace(err) {
		t.Fatalf("WriteAt = %d, %v; want 4, ENOSPC", n, err)
	}
	m.SetCapacity(0)
	// The 6 bytes let through are spent, although the Mem wrote 4.
	if n, err := file.WriteAt([]byte("e"), 4); n != 0 || !errors.Is(err, errInjected) {
		t.Fatalf("WriteAt = %d, %v; want 0, errInjected", n, err)
	}
	if _, err := f.Open("d/missing"); err == nil {
		t.Fatal("Open of a missing file succeeded")
	}
}

func TestFaultyConcurrentBudget(t *testing.T) {
	const budget, writers, writes = 100, 8, 50
	m := NewMem()
	must(t, MkdirAll(m, "d"))
	f := NewFaulty(m)
	f.FailAfterBytes(budget, errInjected)
	var written, syncs atomic.Int64
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			file, err := f.Create(fmt.Sprintf("d/%d", g))
			if err != nil {
				t.Error(err)
				return
			}
			for i := range writes {
				n, err := file.WriteAt([]byte{'x'}, int64(i))
				written.Add(int64(n))
				if (n == 1) == (err != nil) {
					t.Errorf("WriteAt = %d, %v", n, err)
				}
				if file.Sync() == nil {
					syncs.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if written.Load() != budget {
		t.Fatalf("wrote %d bytes, want %d", written.Load(), budget)
	}
	if f.Syncs() != syncs.Load() {
		t.Fatalf("Syncs() = %d, want %d", f.Syncs(), syncs.Load())
	}
}

// TestFaultyFailedWriteback checks that a failed Sync leaves a Mem file's
// unsynced bytes as Linux leaves a failed writeback: read back, but never
// made durable by a later Sync, unless written again; and read as the disk
// holds them after DropCache.
func TestFaultyFailedWriteback(t *testing.T) {
	for _, tc := range []struct {
		name      string
		after     func(t *testing.T, file File) // after the failed Sync
		reads     string                        // then
		crashed   string                        // after a Sync and a crash
		dropCache bool
	}{
		{name: "read back, never synced", after: func(*testing.T, File) {}, reads: "Jello world", crashed: "hello\x00\x00\x00\x00\x00\x00"},
		{name: "written again", after: func(t *testing.T, file File) {
			_, err := file.WriteAt([]byte("Y"), 0)
			must(t, err)
		}, reads: "Yello world", crashed: "Yello\x00\x00\x00\x00\x00\x00"},
		{name: "cache dropped", after: func(t *testing.T, file File) { must(t, file.DropCache()) },
			reads: "hello\x00\x00\x00\x00\x00\x00", crashed: "hello\x00\x00\x00\x00\x00\x00"},
		{name: "cut short", after: func(t *testing.T, file File) { must(t, file.Truncate(3)) },
			reads: "Jel", crashed: "hel"},
		{name: "cut and grown back", after: func(t *testing.T, file File) {
			must(t, file.Truncate(0))
			must(t, file.Truncate(5))
			must(t, file.DropCache()) // the zeros are not from the failed writeback
		}, reads: "\x00\x00\x00\x00\x00", crashed: "\x00\x00\x00\x00\x00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, file := failedWriteback(t, at{"J", 0}, at{" world", 5})
			tc.after(t, file)
			checkReads(t, file, tc.reads)
			must(t, file.Sync())
			m.Crash()
			if got := contents(t, m); got["a"] != tc.crashed {
				t.Fatalf("after a Sync and a crash: %q, want %q", got["a"], tc.crashed)
			}
		})
	}
}

// TestFaultyFailedWritebackTorn checks that a power loss that tears writes
// never makes durable the bytes of a failed writeback, which the disk did
// not take.
func TestFaultyFailedWritebackTorn(t *testing.T) {
	for seed := range uint64(50) {
		m, _ := failedWriteback(t, at{"Jelly", 0})
		m.CrashWith(rand.New(rand.NewPCG(seed, 5)))
		if got := contents(t, m); got["a"] != "hello" {
			t.Fatalf("seed %d: after CrashWith: %q, want %q", seed, got["a"], "hello")
		}
	}
}

// at is a write of s at offset off.
type at struct {
	s   string
	off int64
}

// failedWriteback returns a Mem whose file d/a holds "hello", durably, and
// that file opened through a Faulty, after writes and a Sync that failed.
func failedWriteback(t *testing.T, writes ...at) (*Mem, File) {
	t.Helper()
	m := NewMem()
	must(t, MkdirAll(m, "d"))
	durable(t, m, "d/a", "hello")
	f := NewFaulty(m)
	file, err := f.OpenRW("d/a")
	must(t, err)
	for _, w := range writes {
		_, err = file.WriteAt([]byte(w.s), w.off)
		must(t, err)
	}
	f.FailSync(errInjected)
	if err := file.Sync(); !errors.Is(err, errInjected) {
		t.Fatalf("Sync with FailSync = %v", err)
	}
	f.Heal()
	return m, file
}
