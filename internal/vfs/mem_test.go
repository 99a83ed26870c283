package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

var _ FS = (*Mem)(nil)

func TestMem(t *testing.T) {
	for _, dir := range []string{".", "/", "db", "/abs/db"} {
		t.Run(dir, func(t *testing.T) {
			m := NewMem()
			must(t, MkdirAll(m, dir))
			testFS(t, m, dir)
		})
	}
}

// must fails the test if err is not nil.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// mustOpen returns a function that returns the file an open returns,
// failing the test if the open failed.
func mustOpen(t *testing.T) func(File, error) File {
	return func(f File, err error) File {
		t.Helper()
		must(t, err)
		return f
	}
}

// write writes s at off in the file name of m, opening and closing it,
// and syncs the file if sync is true.
func write(t *testing.T, m *Mem, name, s string, off int64, sync bool) {
	t.Helper()
	f := mustOpen(t)(m.OpenRW(name))
	_, err := f.WriteAt([]byte(s), off)
	must(t, err)
	if sync {
		must(t, f.Sync())
	}
	must(t, f.Close())
}

// durable makes a file name holding s in m, durably, by the FS's own
// operations.
func durable(t *testing.T, m *Mem, name, s string) {
	t.Helper()
	f := mustOpen(t)(m.Create(name))
	_, err := f.WriteAt([]byte(s), 0)
	must(t, err)
	must(t, f.Sync())
	must(t, f.Close())
	must(t, m.SyncDir(path.Dir(name)))
}

// contents returns every file in d and its content.
func contents(t *testing.T, m *Mem) map[string]string {
	t.Helper()
	names, err := m.ReadDir("d")
	must(t, err)
	got := map[string]string{}
	for _, n := range names {
		b, err := m.ReadFile("d/" + n)
		must(t, err)
		got[n] = string(b)
	}
	return got
}

func TestMemCrash(t *testing.T) {
	for _, tc := range []struct {
		name string
		// do changes m, which holds d/a = "hello" durably.
		do   func(t *testing.T, m *Mem)
		want map[string]string
	}{{
		name: "nothing",
		do:   func(t *testing.T, m *Mem) {},
		want: map[string]string{"a": "hello"},
	}, {
		name: "unsynced append is lost",
		do:   func(t *testing.T, m *Mem) { write(t, m, "d/a", " world", 5, false) },
		want: map[string]string{"a": "hello"},
	}, {
		name: "synced append is kept",
		do:   func(t *testing.T, m *Mem) { write(t, m, "d/a", " world", 5, true) },
		want: map[string]string{"a": "hello world"},
	}, {
		name: "append after the last sync is lost",
		do: func(t *testing.T, m *Mem) {
			write(t, m, "d/a", " world", 5, true)
			write(t, m, "d/a", "!", 11, false)
		},
		want: map[string]string{"a": "hello world"},
	}, {
		name: "unsynced overwrite is lost",
		do:   func(t *testing.T, m *Mem) { write(t, m, "d/a", "J", 0, false) },
		want: map[string]string{"a": "hello"},
	}, {
		name: "unsynced truncate is lost",
		do: func(t *testing.T, m *Mem) {
			f := mustOpen(t)(m.OpenRW("d/a"))
			must(t, f.Truncate(1))
			must(t, f.Close())
		},
		want: map[string]string{"a": "hello"},
	}, {
		name: "unsynced Create over a file is lost",
		do: func(t *testing.T, m *Mem) {
			f := mustOpen(t)(m.Create("d/a"))
			must(t, f.Close())
			must(t, m.SyncDir("d"))
		},
		want: map[string]string{"a": "hello"},
	}, {
		name: "creation without SyncDir is lost",
		do: func(t *testing.T, m *Mem) {
			f := mustOpen(t)(m.Create("d/b"))
			_, err := f.WriteAt([]byte("data"), 0)
			must(t, err)
			must(t, f.Sync())
		},
		want: map[string]string{"a": "hello"},
	}, {
		name: "synced creation without file Sync is empty",
		do: func(t *testing.T, m *Mem) {
			f := mustOpen(t)(m.Create("d/b"))
			_, err := f.WriteAt([]byte("data"), 0)
			must(t, err)
			must(t, m.SyncDir("d"))
		},
		want: map[string]string{"a": "hello", "b": ""},
	}, {
		name: "removal without SyncDir is undone",
		do:   func(t *testing.T, m *Mem) { must(t, m.Remove("d/a")) },
		want: map[string]string{"a": "hello"},
	}, {
		name: "synced removal is kept",
		do: func(t *testing.T, m *Mem) {
			must(t, m.Remove("d/a"))
			must(t, m.SyncDir("d"))
		},
		want: map[string]string{},
	}, {
		name: "rename without SyncDir is undone",
		do:   func(t *testing.T, m *Mem) { must(t, m.Rename("d/a", "d/b")) },
		want: map[string]string{"a": "hello"},
	}, {
		name: "synced rename is kept",
		do: func(t *testing.T, m *Mem) {
			must(t, m.Rename("d/a", "d/b"))
			must(t, m.SyncDir("d"))
		},
		want: map[string]string{"b": "hello"},
	}, {
		name: "synced rename over a file replaces it",
		do: func(t *testing.T, m *Mem) {
			durable(t, m, "d/b", "old")
			f := mustOpen(t)(m.Create("d/b.tmp"))
			_, err := f.WriteAt([]byte("new"), 0)
			must(t, err)
			must(t, f.Sync())
			must(t, m.Rename("d/b.tmp", "d/b"))
			must(t, m.SyncDir("d"))
		},
		want: map[string]string{"a": "hello", "b": "new"},
	}, {
		name: "unsynced rename over a file is undone",
		do: func(t *testing.T, m *Mem) {
			durable(t, m, "d/b", "old")
			must(t, m.Rename("d/a", "d/b"))
		},
		want: map[string]string{"a": "hello", "b": "old"},
	}, {
		name: "rename keeps synced data written after it",
		do: func(t *testing.T, m *Mem) {
			f := mustOpen(t)(m.OpenRW("d/a"))
			must(t, m.Rename("d/a", "d/b"))
			must(t, m.SyncDir("d"))
			_, err := f.WriteAt([]byte("J"), 0)
			must(t, err)
			must(t, f.Sync())
		},
		want: map[string]string{"b": "Jello"},
	}, {
		name: "a removed open file can be written but is gone",
		do: func(t *testing.T, m *Mem) {
			f := mustOpen(t)(m.OpenRW("d/a"))
			must(t, m.Remove("d/a"))
			must(t, m.SyncDir("d"))
			_, err := f.WriteAt([]byte("J"), 0)
			must(t, err)
			must(t, f.Sync())
			checkReads(t, f, "Jello")
		},
		want: map[string]string{},
	}, {
		name: "WriteFile is durable at once",
		do: func(t *testing.T, m *Mem) {
			must(t, m.WriteFile("d/a", []byte("bad")))
			must(t, m.WriteFile("d/b", []byte("new")))
		},
		want: map[string]string{"a": "bad", "b": "new"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMem()
			must(t, MkdirAll(m, "d"))
			durable(t, m, "d/a", "hello")
			tc.do(t, m)
			m.Crash()
			if got := contents(t, m); !equalMaps(got, tc.want) {
				t.Fatalf("after Crash: %q, want %q", got, tc.want)
			}
		})
	}
}

// equalMaps reports whether a and b hold the same pairs.
func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			return false
		}
	}
	return true
}

// TestMemCrashDirectories checks that a directory survives a crash only once
// its parent is synced, and takes what it holds with it otherwise; and that
// MkdirAll syncs what it makes, and what an earlier run made without
// syncing.
func TestMemCrashDirectories(t *testing.T) {
	m := NewMem()
	must(t, m.Mkdir("redo"))
	must(t, MkdirAll(m, "redo")) // as if after a crash before syncing "."
	must(t, MkdirAll(m, "p"))
	must(t, m.Mkdir("p/q"))                       // as if after a crash before syncing p
	must(t, MkdirAll(m, "p/q/data"))              // syncs p too
	durable(t, m, "p/q/data/log", "acknowledged") // synced, in p/q/data
	must(t, MkdirAll(m, "x/y"))
	must(t, m.Mkdir("x/lost"))
	durable(t, m, "x/lost/f", "data") // synced in x/lost, which x does not hold durably
	must(t, m.Mkdir("x/z"))
	must(t, m.Mkdir("x/z/kept")) // x/z holds it durably, but x does not hold x/z
	must(t, m.SyncDir("x/z"))
	m.Crash()
	for dir, want := range map[string][]string{".": {"p", "redo", "x"}, "x": {"y"}, "redo": nil, "p/q/data": {"log"}} {
		if names, err := m.ReadDir(dir); err != nil || !slices.Equal(names, want) {
			t.Errorf("after Crash, ReadDir(%s) = %q, %v, want %q", dir, names, err, want)
		}
	}
	for _, name := range []string{"x/lost", "x/z/kept"} {
		if _, err := m.ReadDir(name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after Crash, ReadDir(%s): %v, want it gone", name, err)
		}
	}
	if err := m.WriteFile("x/lost/f", nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("WriteFile in a directory a crash removed: %v", err)
	}
}

func TestMemCrashRenameAcrossDirectories(t *testing.T) {
	m := NewMem()
	must(t, MkdirAll(m, "d"))
	must(t, MkdirAll(m, "e"))
	durable(t, m, "d/a", "hello")
	must(t, m.Rename("d/a", "e/a"))
	must(t, m.SyncDir("e")) // but not d: the file has both names
	m.Crash()
	for _, name := range []string{"d/a", "e/a"} {
		if b, err := m.ReadFile(name); string(b) != "hello" || err != nil {
			t.Fatalf("ReadFile(%s) = %q, %v", name, b, err)
		}
	}
}

// TestMemCrashKeepsDirectoryChangesInOrder checks that CrashWith keeps the
// oldest unsynced changes to a directory, each whole, and no others; and
// that SyncDir takes its directory's changes out of what a crash may undo.
func TestMemCrashKeepsDirectoryChangesInOrder(t *testing.T) {
	// What d holds after each prefix of the changes below.
	states := []map[string]string{
		{"x": "X", "z": "Z"},
		{"a": "A", "x": "X", "z": "Z"},
		{"a": "A", "y": "X", "z": "Z"},
		{"a": "A", "y": "X"},
		{"a": "A", "y": "X", "b": ""},
		{"y": "X", "b": ""},
		{"a": "X", "b": ""},
	}
	seen := make([]bool, len(states))
	for seed := range uint64(200) {
		m := NewMem()
		must(t, MkdirAll(m, "d"))
		durable(t, m, "d/x", "X")
		durable(t, m, "d/z", "Z")
		f := mustOpen(t)(m.Create("d/a"))
		_, err := f.WriteAt([]byte("A"), 0)
		must(t, err)
		must(t, f.Sync()) // the content, not the name
		must(t, m.Rename("d/x", "d/y"))
		must(t, m.Remove("d/z"))
		mustOpen(t)(m.Create("d/b"))
		must(t, m.Remove("d/a"))
		must(t, m.Rename("d/y", "d/a"))
		m.CrashWith(rand.New(rand.NewPCG(seed, 1)))
		got := contents(t, m)
		i := slices.IndexFunc(states, func(s map[string]string) bool { return equalMaps(got, s) })
		if i < 0 {
			t.Fatalf("seed %d: after CrashWith, d holds %q: no prefix of the changes", seed, got)
		}
		seen[i] = true
	}
	if i := slices.Index(seen, false); i >= 0 {
		t.Errorf("no seed kept exactly the first %d changes", i)
	}

	for seed := range uint64(50) {
		m := NewMem()
		must(t, MkdirAll(m, "d"))
		durable(t, m, "d/a", "A")
		must(t, m.Remove("d/a"))
		must(t, m.WriteFile("d/a", []byte("W"))) // durable, whatever came before
		m.CrashWith(rand.New(rand.NewPCG(seed, 3)))
		if b, err := m.ReadFile("d/a"); err != nil || string(b) != "W" {
			t.Fatalf("seed %d: after WriteFile and CrashWith, d/a = %q, %v; want %q", seed, b, err, "W")
		}
	}

	for seed := range uint64(50) {
		m := NewMem()
		must(t, MkdirAll(m, "d"))
		must(t, MkdirAll(m, "e"))
		durable(t, m, "d/a", "old")
		must(t, m.Remove("d/a"))
		durable(t, m, "d/a", "new") // syncs d: the removal is durable
		must(t, m.Rename("d/a", "e/a"))
		must(t, m.SyncDir("e")) // but not d
		m.CrashSectors(rand.New(rand.NewPCG(seed, 2)))
		for _, name := range []string{"e/a", "d/a"} {
			b, err := m.ReadFile(name)
			if name == "d/a" && errors.Is(err, fs.ErrNotExist) {
				continue // the rename's unsynced half was kept
			}
			if err != nil || string(b) != "new" {
				t.Fatalf("seed %d: after CrashSectors, %s = %q, %v; want %q", seed, name, b, err, "new")
			}
		}
	}
}

// TestMemCrashKeepsNothingAfterALostMkdir checks that a crash that undoes
// an unsynced Mkdir keeps no directory change made after it, even in a
// directory that survives, as a journaling filesystem would not.
func TestMemCrashKeepsNothingAfterALostMkdir(t *testing.T) {
	for _, syncSub := range []bool{false, true} {
		for seed := range uint64(50) {
			m := NewMem()
			must(t, MkdirAll(m, "d"))
			durable(t, m, "d/a", "A")
			must(t, m.Mkdir("d/sub")) // d is not synced
			must(t, m.Rename("d/a", "d/sub/a"))
			if syncSub {
				must(t, m.SyncDir("d/sub"))
			}
			m.CrashWith(rand.New(rand.NewPCG(seed, 4)))
			if b, err := m.ReadFile("d/a"); err != nil || string(b) != "A" {
				t.Fatalf("SyncDir(d/sub) %v, seed %d: after CrashWith, d/a = %q, %v; want %q",
					syncSub, seed, b, err, "A")
			}
		}
	}
}

// TestMemCrashWith tears unsynced writes: a crash keeps a prefix of the
// changed bytes, from the first changed one to the end. The first test
// overwrites a synced byte and appends; the second only overwrites synced
// bytes, as writing over preallocated zeros does.
func TestMemCrashWith(t *testing.T) {
	for _, c := range []struct {
		name, synced, write string
		at                  int64
	}{
		{"overwrite and append", "hello", "Jello torn world, torn world", 0},
		{"overwrite only", "hello, zeros: 0000000000000000", "frames!", 14},
	} {
		t.Run(c.name, func(t *testing.T) {
			now := []byte(c.synced)
			now = append(now[:c.at], c.write...)
			now = append(now, c.synced[min(len(c.synced), len(now)):]...)
			lengths := map[int]bool{}
			for seed := range uint64(200) {
				got := crashWith(t, seed, c.synced, c.write, c.at)
				k := 0 // the written bytes kept: got must be now[:at+k] + synced[at+k:]
				for ; k < len(c.write) && c.at+int64(k) < int64(len(got)) && got[c.at+int64(k)] == now[c.at+int64(k)]; k++ {
				}
				want := string(now[:c.at+int64(k)]) + c.synced[min(len(c.synced), int(c.at)+k):]
				if got != want {
					t.Fatalf("seed %d: after CrashWith, %q; want %q with a prefix of %q written at %d", seed, got, c.synced, c.write, c.at)
				}
				if again := crashWith(t, seed, c.synced, c.write, c.at); again != got {
					t.Fatalf("seed %d: CrashWith kept %q, then %q", seed, got, again)
				}
				lengths[k] = true
			}
			if len(lengths) < len(c.write)/2 {
				t.Fatalf("200 crashes kept only %d different prefixes", len(lengths))
			}
		})
	}
}

// TestMemCrashSectors tears a write of four sectors, over synced bytes and
// past them: each sector is kept whole or lost whole, a lost sector past
// the durable end reads as zeros when a later one is kept, and crashes keep
// sectors after lost ones, as no prefix would.
func TestMemCrashSectors(t *testing.T) {
	synced := bytes.Repeat([]byte("s"), SectorSize+100)
	const at, end = 100, 4 * SectorSize
	patterns := map[string]bool{}
	for seed := range uint64(100) {
		m := NewMem()
		must(t, MkdirAll(m, "d"))
		durable(t, m, "d/a", string(synced))
		write(t, m, "d/a", strings.Repeat("w", end-at), at, false)
		m.CrashSectors(rand.New(rand.NewPCG(seed, 0)))
		got, err := m.ReadFile("d/a")
		must(t, err)
		want, pattern := bytes.Clone(synced), ""
		for lo := 0; lo < end; lo += SectorSize {
			first := max(lo, at)
			if first >= len(got) || got[first] != 'w' {
				pattern += "-"
				continue
			}
			pattern += "w"
			want = append(want, make([]byte, max(0, lo+SectorSize-len(want)))...)
			copy(want[first:lo+SectorSize], strings.Repeat("w", lo+SectorSize-first))
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d: kept sectors %s, but the file holds %q", seed, pattern, got)
		}
		patterns[pattern] = true
	}
	if len(patterns) < 12 {
		t.Fatalf("100 crashes kept only %d of the 16 patterns of sectors: %v", len(patterns), patterns)
	}
}

// crashWith syncs synced to a file, writes unsynced at at without syncing,
// crashes with seed, and returns what the file holds.
func crashWith(t *testing.T, seed uint64, synced, unsynced string, at int64) string {
	m := NewMem()
	must(t, MkdirAll(m, "d"))
	durable(t, m, "d/a", synced)
	write(t, m, "d/a", unsynced, at, false)
	m.CrashWith(rand.New(rand.NewPCG(seed, 0)))
	b, err := m.ReadFile("d/a")
	must(t, err)
	m.Crash() // what a crash kept is on the disk
	if again, _ := m.ReadFile("d/a"); !bytes.Equal(again, b) {
		t.Fatalf("seed %d: CrashWith kept %q, then Crash %q", seed, b, again)
	}
	return string(b)
}

func TestMemStaleHandles(t *testing.T) {
	m := NewMem()
	must(t, MkdirAll(m, "d"))
	durable(t, m, "d/a", "hello")
	f := mustOpen(t)(m.OpenRW("d/a"))
	closed := mustOpen(t)(m.Open("d/a"))
	must(t, closed.Close())
	m.Crash()
	buf := make([]byte, 1)
	for _, op := range []struct {
		name string
		err  error
	}{
		{"Read", first(f.Read(buf))},
		{"ReadAt", first(f.ReadAt(buf, 0))},
		{"WriteAt", first(f.WriteAt(buf, 0))},
		{"Sync", f.Sync()},
		{"Truncate", f.Truncate(0)},
		{"Size", first(f.Size())},
		{"Close", f.Close()},
		{"Close of a closed file", closed.Close()},
	} {
		var pe *os.PathError
		if !errors.Is(op.err, ErrStaleHandle) || !errors.As(op.err, &pe) || pe.Path != "d/a" {
			t.Errorf("%s after Crash: %v, want ErrStaleHandle naming d/a", op.name, op.err)
		}
	}
	g := mustOpen(t)(m.Open("d/a"))
	checkReads(t, g, "hello")
	must(t, g.Close())
}

func TestMemHandleErrors(t *testing.T) {
	m := NewMem()
	must(t, MkdirAll(m, "d"))
	durable(t, m, "d/a", "hello")
	ro := mustOpen(t)(m.Open("d/a"))
	rw := mustOpen(t)(m.OpenRW("d/a"))
	must(t, rw.Close())
	rw2 := mustOpen(t)(m.OpenRW("d/a"))
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"WriteAt read-only", first(ro.WriteAt([]byte("x"), 0)), syscall.EBADF},
		{"Truncate read-only", ro.Truncate(0), syscall.EBADF},
		{"ReadAt negative", first(ro.ReadAt(make([]byte, 1), -1)), syscall.EINVAL},
		{"WriteAt negative", first(rw2.WriteAt(make([]byte, 1), -1)), syscall.EINVAL},
		{"Read closed", first(rw.Read(make([]byte, 1))), fs.ErrClosed},
		{"Close closed", rw.Close(), fs.ErrClosed},
		{"Create a directory", first(m.Create("d")), syscall.EISDIR},
		{"Open a root", first(m.Open("/")), syscall.EISDIR},
		{"Rename a directory", m.Rename("d", "e"), syscall.EISDIR},
		{"Rename over a directory", m.Rename("d/a", "."), syscall.EISDIR},
		{"MkdirAll over a file", MkdirAll(m, "d/a/b"), syscall.ENOTDIR},
		{"Mkdir over a file", m.Mkdir("d/a"), fs.ErrExist},
		{"Mkdir again", m.Mkdir("d"), fs.ErrExist},
		{"Mkdir in a missing directory", m.Mkdir("nodir/d"), fs.ErrNotExist},
		{"Remove a directory", m.Remove("d"), syscall.EISDIR},
		{"SyncDir missing", m.SyncDir("nodir"), fs.ErrNotExist},
		{"ReadFile missing", first(m.ReadFile("d/b")), fs.ErrNotExist},
		{"WriteFile in a missing directory", m.WriteFile("nodir/b", nil), fs.ErrNotExist},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	// Read-only handles can still be synced, as with fsync.
	must(t, ro.Sync())
}

func TestMemReadDir(t *testing.T) {
	m := NewMem()
	must(t, MkdirAll(m, "d/sub/deeper"))
	must(t, MkdirAll(m, "/d/elsewhere"))
	for _, name := range []string{"d/z", "d/a", "d/sub/x"} {
		must(t, m.WriteFile(name, nil))
	}
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{".", []string{"d"}},
		{"", []string{"d"}},
		{"/", []string{"d"}},
		{"d", []string{"a", "sub", "z"}},
		{"./d/", []string{"a", "sub", "z"}},
		{"d/sub", []string{"deeper", "x"}},
		{"d/sub/deeper", []string{}},
		{"/d", []string{"elsewhere"}},
	} {
		if got, err := m.ReadDir(tc.dir); !slices.Equal(got, tc.want) || err != nil {
			t.Errorf("ReadDir(%q) = %q, %v; want %q", tc.dir, got, err, tc.want)
		}
	}
}

func TestMemCapacity(t *testing.T) {
	m := NewMem()
	must(t, MkdirAll(m, "d"))
	m.SetCapacity(10)
	a := mustOpen(t)(m.Create("d/a"))
	b := mustOpen(t)(m.Create("d/b"))
	writeAt := func(f File, s string, off int64, wantN int, wantFull bool) {
		t.Helper()
		n, err := f.WriteAt([]byte(s), off)
		if n != wantN || IsNoSpace(err) != wantFull || !wantFull && err != nil {
			t.Fatalf("WriteAt(%q, %d) = %d, %v; want %d bytes, full %v", s, off, n, err, wantN, wantFull)
		}
		var pe *os.PathError
		if wantFull && (!errors.As(err, &pe) || pe.Path == "" || !errors.Is(err, ErrNoSpace)) {
			t.Fatalf("ENOSPC error %v does not name the file", err)
		}
	}
	writeAt(a, "123456", 0, 6, false)
	writeAt(b, "abcdef", 0, 4, true) // 4 fit
	checkReads(t, b, "abcd")
	writeAt(b, "x", 4, 0, true)
	writeAt(a, "XY", 0, 2, false) // overwrites need no space
	writeAt(b, "x", 6, 0, true)   // nor does a gap of zeros fit

	must(t, a.Truncate(2))
	writeAt(b, "efghij", 4, 4, true) // 2 + 8 = 10
	checkReads(t, b, "abcdefgh")

	must(t, m.Remove("d/a")) // frees a's 2 bytes
	// A removed file does not count, but grows only into the room left.
	writeAt(a, "orphan", 2, 2, true)
	writeAt(b, "ij", 8, 2, false)
	writeAt(b, "k", 10, 0, true)

	f := mustOpen(t)(m.Create("d/b")) // truncates b, freeing 10 bytes
	writeAt(f, "0123456789", 0, 10, false)
	m.SetCapacity(0)
	writeAt(f, strings.Repeat("z", 1000), 10, 1000, false)
}

func TestMemConcurrent(t *testing.T) {
	m := NewMem()
	must(t, MkdirAll(m, "d"))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			name := fmt.Sprintf("d/%d", g%4) // two goroutines per file
			for i := range 100 {
				f, err := m.Create(name)
				if err != nil {
					t.Error(err)
					return
				}
				f.WriteAt(bytes.Repeat([]byte{byte(i)}, 10), int64(i))
				f.Sync()
				f.ReadAt(make([]byte, 5), 3)
				f.Size()
				f.Close()
				m.SyncDir("d")
				m.ReadDir("d")
				m.Rename(name, name+".tmp")
				m.Rename(name+".tmp", name)
				if g == 0 && i%10 == 0 {
					m.CrashWith(rand.New(rand.NewPCG(uint64(i), 0)))
				}
			}
		})
	}
	wg.Wait()
}
