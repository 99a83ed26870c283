package wal_test

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"path"
	"strconv"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/frame"
	"github.com/flintkv/flint/internal/seedtest"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// Frame types of format version 2, the version, and the header's size.
const (
	typeHeader    = 1
	typeEntry     = 2
	typeHardState = 3
	typeSeal      = 4
	walVersion    = 2
	headerSize    = 40
	sealFrameSize = 24 // 8 (len, crc) + 1 (type) + 12, padded
)

// durableDamage is what the error for damage followed by a later write
// says.
const durableDamage = "was made once it was durable, so this is damage"

// testLog is a log written for a test: several segments, the last holding
// several entries and ending with one, in a write of its own. Every write
// ends with a seal. Its final hard state is lastHS.
type testLog struct {
	m       *vfs.Mem
	segs    []string
	entries []raftpb.Entry // saved, in order, without repeated indexes
	lastHS  raftpb.HardState
}

// lastEntryData makes the last entry's frame end in 5 bytes of padding:
// 8 (len, crc) + 1 (type) + 1 (term) + 1 (index) + 1 (entry type) + 15 = 27.
var lastEntryData = []byte("last entry data")

func newTestLog(t testing.TB) *testLog {
	t.Helper()
	m := vfs.NewMem()
	l := &testLog{m: m}
	w, _ := mustOpen(t, m, small, 0)
	for i := uint64(1); i <= 30; i++ {
		l.lastHS = hardState(2, 1, i-1)
		mustSave(t, w, entries(i, i, 2), l.lastHS)
	}
	mustClose(t, w)
	// More frames in the last segment.
	w, _ = mustOpen(t, m, wal.Options{SegmentSize: 1 << 20}, 0)
	for i := uint64(31); i <= 35; i++ {
		l.lastHS = hardState(2, 1, i-1)
		mustSave(t, w, entries(i, i, 2), l.lastHS)
	}
	last := raftpb.Entry{Index: 36, Term: 2, Data: lastEntryData}
	mustSave(t, w, []raftpb.Entry{last}, l.lastHS) // an entry alone
	mustClose(t, w)
	l.entries = append(entries(1, 35, 2), last)
	l.segs = segments(t, m)
	if len(l.segs) < 5 {
		t.Fatalf("test log has %d segments, want several", len(l.segs))
	}
	return l
}

// frames returns the frames of segment i (negative: from the end).
func (l *testLog) frames(t testing.TB, i int) (string, []byte, []frameInfo) {
	t.Helper()
	if i < 0 {
		i += len(l.segs)
	}
	b := readFile(t, l.m, l.segs[i])
	return l.segs[i], b, framesOf(t, b)
}

// flip returns b with the byte at off changed.
func flip(b []byte, off int64) []byte {
	b = bytes.Clone(b)
	b[off] ^= 0x5a
	return b
}

// setLen returns b with the length of the frame at off set to n.
func setLen(b []byte, off int64, n uint32) []byte {
	b = bytes.Clone(b)
	binary.LittleEndian.PutUint32(b[off:], n)
	return b
}

// splice returns b with ins inserted at off.
func splice(b []byte, off int64, ins []byte) []byte {
	return append(append(bytes.Clone(b[:off]), ins...), b[off:]...)
}

// header returns a header frame.
func header(magic string, version uint32, seq, first uint64) []byte {
	p := append([]byte(magic), binary.LittleEndian.AppendUint32(nil, version)...)
	p = binary.LittleEndian.AppendUint64(p, seq)
	p = binary.LittleEndian.AppendUint64(p, first)
	return frame.Append(nil, typeHeader, p)
}

// TestCorruption damages segments in ways Open must report as an *Error
// naming the file and offset, never skipping or truncating anything.
func TestCorruption(t *testing.T) {
	for _, tc := range []struct {
		name string
		// damage damages l and returns the segment and offset Open must
		// report, and words its reason must hold.
		damage func(t *testing.T, l *testLog) (string, int64, []string)
		after  uint64
	}{{
		name: "flipped byte in a middle segment",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, b, fr := l.frames(t, 1)
			f := fr[2] // the first entry
			writeFile(t, l.m, name, flip(b, f.off+f.size/2))
			return name, f.off, []string{"checksum mismatch", "not the last"}
		},
	}, {
		name: "flipped byte in the first segment's header",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, b, _ := l.frames(t, 0)
			writeFile(t, l.m, name, flip(b, 20))
			return name, 0, []string{"checksum mismatch"}
		},
	}, {
		name: "flipped length in a middle segment",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, b, fr := l.frames(t, 2)
			f := fr[3]
			writeFile(t, l.m, name, flip(b, f.off))
			return name, f.off, []string{"not the last"}
		},
	}, {
		name: "torn end of a middle segment",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, b, fr := l.frames(t, 1)
			f := fr[len(fr)-1]
			writeFile(t, l.m, name, b[:f.off+f.size-1])
			return name, f.off, []string{"not the last"}
		},
	}, {
		name: "empty middle segment",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, _, _ := l.frames(t, 1)
			writeFile(t, l.m, name, nil)
			return name, 0, []string{"empty segment"}
		},
	}, {
		name: "flipped byte in the last segment before valid records",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, b, fr := l.frames(t, -1)
			f := fr[len(fr)-4] // the hard state of the write before the last
			writeFile(t, l.m, name, flip(b, f.off+f.size/2))
			return name, f.off, []string{"checksum mismatch", durableDamage}
		},
	}, {
		name: "flipped byte in the seal before the last write",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, b, fr := l.frames(t, -1)
			f := fr[len(fr)-3]
			writeFile(t, l.m, name, flip(b, f.off+frame.HeaderSize))
			return name, f.off, []string{"checksum mismatch", "the write sealed at offset " + itoa(fr[len(fr)-1].off) + " " + durableDamage}
		},
	}, {
		name: "zero length in the last segment",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, b, fr := l.frames(t, -1)
			f := fr[3]
			writeFile(t, l.m, name, setLen(b, f.off, 0))
			return name, f.off, []string{"bad frame length 0", durableDamage}
		},
	}, {
		name: "huge length in the last segment",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, b, fr := l.frames(t, -1)
			f := fr[3]
			writeFile(t, l.m, name, setLen(b, f.off, 1<<31))
			return name, f.off, []string{"bad frame length", durableDamage}
		},
	}, {
		name: "length past the end in the last segment",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			// It looks like a torn write, but later writes follow.
			name, b, fr := l.frames(t, -1)
			f := fr[3]
			writeFile(t, l.m, name, setLen(b, f.off, uint32(len(b))))
			return name, f.off, []string{"file ends", durableDamage}
		},
	}, {
		name: "missing middle segment",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			if err := l.m.Remove(path.Join(dir, l.segs[2])); err != nil {
				t.Fatal(err)
			}
			return l.segs[3], 0, []string{"segments 3 to 3 are missing"}
		},
	}, {
		name: "missing first segment",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			if err := l.m.Remove(path.Join(dir, l.segs[0])); err != nil {
				t.Fatal(err)
			}
			first := segmentFirst(t, l.segs[1])
			return l.segs[1], 0, []string{"starts at entry " + itoa(int64(first)), "entries 1 to " + itoa(int64(first-1)) + " are missing"}
		},
	}, {
		name:  "first segment after the snapshot",
		after: 3,
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			// ReleaseTo deletes segments that a snapshot covers; opening
			// the log after an older snapshot finds entries missing.
			w, _ := mustOpen(t, l.m, small, 0)
			if err := w.ReleaseTo(20); err != nil {
				t.Fatal(err)
			}
			mustClose(t, w)
			segs := segments(t, l.m)
			first := segmentFirst(t, segs[0])
			if first <= 4 {
				t.Fatalf("after ReleaseTo(20) the log starts at %d", first)
			}
			return segs[0], 0, []string{"the snapshot ends at 3", "entries 4 to " + itoa(int64(first-1)) + " are missing"}
		},
	}, {
		name: "bad magic in a middle segment",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, b, _ := l.frames(t, 1)
			h := header("FLNTWAL2", walVersion, 2, segmentFirst(t, name))
			writeFile(t, l.m, name, append(h, b[headerSize:]...))
			return name, 0, []string{"bad magic"}
		},
	}, {
		name: "bad magic in the last segment",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, b, _ := l.frames(t, -1)
			h := header("FLNTSNP1", walVersion, uint64(len(l.segs)), segmentFirst(t, name))
			writeFile(t, l.m, name, append(h, b[headerSize:]...))
			return name, 0, []string{"bad magic"}
		},
	}, {
		name: "bad version",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, b, _ := l.frames(t, -1)
			h := header("FLNTWAL1", 1, uint64(len(l.segs)), segmentFirst(t, name))
			writeFile(t, l.m, name, append(h, b[headerSize:]...))
			return name, 0, []string{"log format version 1, this build reads versions 2 to 3"}
		},
	}, {
		name: "short header",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, b, _ := l.frames(t, 1)
			writeFile(t, l.m, name, append(frame.Append(nil, typeHeader, []byte("FLNTWAL1")), b[headerSize:]...))
			return name, 0, []string{"bad magic"}
		},
	}, {
		name: "header of another segment",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, b, _ := l.frames(t, 1)
			h := header("FLNTWAL1", walVersion, 7, segmentFirst(t, name))
			writeFile(t, l.m, name, append(h, b[headerSize:]...))
			return name, 0, []string{"header says segment 7"}
		},
	}, {
		name: "no header",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, b, _ := l.frames(t, 1)
			writeFile(t, l.m, name, b[headerSize:])
			return name, 0, []string{"does not start with a header"}
		},
	}, {
		name: "two headers",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, b, _ := l.frames(t, 1)
			writeFile(t, l.m, name, splice(b, headerSize, b[:headerSize]))
			return name, headerSize, []string{"unknown frame type 1"}
		},
	}, {
		name: "unknown frame type in a middle segment",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, b, fr := l.frames(t, 1)
			writeFile(t, l.m, name, splice(b, fr[3].off, frame.Append(nil, 9, []byte("new"))))
			return name, fr[3].off, []string{"unknown frame type 9"}
		},
	}, {
		name: "unknown frame type at the end of the last segment",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, b, _ := l.frames(t, -1)
			writeFile(t, l.m, name, append(bytes.Clone(b), frame.Append(nil, 9, nil)...))
			return name, int64(len(b)), []string{"unknown frame type 9"}
		},
	}, {
		name: "bad entry record",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, b, fr := l.frames(t, -1)
			writeFile(t, l.m, name, splice(b, fr[2].off, frame.Append(nil, typeEntry, []byte{1, 0x80})))
			return name, fr[2].off, []string{"bad entry index"}
		},
	}, {
		name: "bad hard state record",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			name, b, fr := l.frames(t, 1)
			writeFile(t, l.m, name, splice(b, fr[2].off, frame.Append(nil, typeHardState, []byte{1, 2, 3, 4})))
			return name, fr[2].off, []string{"bad hard state"}
		},
	}, {
		name: "entry missing inside a segment",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			// The first entry of segment 1 is lost; the next one shows it.
			name, b, fr := l.frames(t, 1)
			var ents []frameInfo
			for _, f := range fr {
				if f.typ == typeEntry {
					ents = append(ents, f)
				}
			}
			f, next := ents[0], ents[1]
			writeFile(t, l.m, name, append(bytes.Clone(b[:f.off]), b[f.off+f.size:]...))
			return name, next.off - f.size, []string{"entries are missing"}
		},
	}, {
		name: "entries missing between segments",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			// The last entry of segment 1 is lost, and the name of
			// segment 2 says so.
			name, b, fr := l.frames(t, 1)
			f := lastEntry(fr)
			writeFile(t, l.m, name, append(bytes.Clone(b[:f.off]), b[f.off+f.size:]...))
			return name, int64(len(b)) - f.size, []string{"are missing", "cut short"}
		},
	}, {
		name: "middle segment cut at the end of a write, before a segment with no entries",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			return cutBeforeEmpty(t, l, func(b []byte, end int64) []byte { return b[:end] })
		},
	}, {
		name: "middle segment zeroed from the end of a write, before a segment with no entries",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			return cutBeforeEmpty(t, l, func(b []byte, end int64) []byte {
				return append(bytes.Clone(b[:end]), make([]byte, int64(len(b))-end)...)
			})
		},
	}, {
		name: "not a segment name",
		damage: func(t *testing.T, l *testLog) (string, int64, []string) {
			writeFile(t, l.m, "0000000000000001-000000000000000X.wal", nil)
			return "0000000000000001-000000000000000X.wal", 0, []string{"not a segment name"}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			l := newTestLog(t)
			name, off, words := tc.damage(t, l)
			before := map[string][]byte{}
			for _, s := range segments(t, l.m) {
				before[s] = readFile(t, l.m, s)
			}
			var logBuf bytes.Buffer
			_, r, err := open(t, l.m, wal.Options{Logger: logger(&logBuf)}, tc.after)
			checkWalError(t, err, name, off, words...)
			if !strings.HasPrefix(err.Error(), "wal: ") || !strings.Contains(err.Error(), name) {
				t.Fatalf("error %q", err)
			}
			if !strings.Contains(err.Error(), "restore") && !strings.Contains(err.Error(), "move the") {
				t.Fatalf("error %q does not say what the operator can do", err)
			}
			// Nothing was changed.
			for s, b := range before {
				if got := readFile(t, l.m, s); !bytes.Equal(got, b) {
					t.Fatalf("Open changed %s from %d to %d bytes", s, len(b), len(got))
				}
			}
			if logBuf.Len() != 0 {
				t.Fatalf("Open logged %s", logBuf.String())
			}
			// What was replayed before the damage is right.
			checkEntries(t, "replay before the damage", r.entries(), l.entries[:len(r.entries())])
		})
	}
}

// cutBeforeEmpty leaves the last segment as a rotation makes it, with no
// entry (its header, hard state and seal), and has cut make the segment
// before it end at the start of its last entry's write, the end of the
// write before. It returns what Open must report: that segment, at that
// offset, and the entries lost.
func cutBeforeEmpty(t *testing.T, l *testLog, cut func(b []byte, end int64) []byte) (string, int64, []string) {
	lastName, lb, lfr := l.frames(t, -1)
	writeFile(t, l.m, lastName, lb[:lfr[3].off])
	name, b, fr := l.frames(t, -2)
	end := lastEntry(fr).off
	writeFile(t, l.m, name, cut(b, end))
	first := segmentFirst(t, lastName)
	return name, end, []string{"starts at " + itoa(int64(first)), "entries " + itoa(int64(first-1)) + " to " + itoa(int64(first-1)) + " are missing", "cut short"}
}

// lastEntry returns the last entry frame of fr.
func lastEntry(fr []frameInfo) frameInfo {
	i := len(fr) - 1
	for fr[i].typ != typeEntry {
		i--
	}
	return fr[i]
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestTornTail damages the end of the last segment as a crash during a write
// does: Open truncates the damage, logs it, and the log goes on.
func TestTornTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 0))
	for _, tc := range []struct {
		name string
		// tear damages the last segment's content b, whose frames are fr,
		// and returns it with the size Open must truncate it to.
		tear func(b []byte, fr []frameInfo) ([]byte, int64)
		// lost is how many entries at the end Open drops.
		lost int
		// hs is the hard state left, if not the last saved.
		hs *raftpb.HardState
		// sealAfter is true if the last write's seal is left after the
		// damage.
		sealAfter bool
	}{{
		name: "cut in the payload",
		tear: func(b []byte, fr []frameInfo) ([]byte, int64) {
			f := fr[len(fr)-2] // the last entry; its write's seal follows
			return b[:f.off+f.size/2], f.off
		},
		lost: 1,
	}, {
		name: "cut in the frame header",
		tear: func(b []byte, fr []frameInfo) ([]byte, int64) {
			f := fr[len(fr)-2] // the last entry; its write's seal follows
			return b[:f.off+3], f.off
		},
		lost: 1,
	}, {
		name: "cut after the frame header",
		tear: func(b []byte, fr []frameInfo) ([]byte, int64) {
			f := fr[len(fr)-2] // the last entry; its write's seal follows
			return b[:f.off+frame.HeaderSize], f.off
		},
		lost: 1,
	}, {
		name: "cut in the padding",
		tear: func(b []byte, fr []frameInfo) ([]byte, int64) {
			f := fr[len(fr)-2] // the last entry; its write's seal follows
			return b[:f.off+f.size-2], f.off
		},
		lost: 1,
	}, {
		name: "cut after the type byte of the previous frame",
		tear: func(b []byte, fr []frameInfo) ([]byte, int64) {
			f := fr[len(fr)-4] // the write before the last: hard state, seal
			return b[:f.off+frame.HeaderSize+1], f.off
		},
		lost: 1, // the hard state's write did not change the log
		hs:   &raftpb.HardState{Term: 2, Vote: 1, Commit: 33},
	}, {
		name: "cut and zeros appended",
		tear: func(b []byte, fr []frameInfo) ([]byte, int64) {
			f := fr[len(fr)-2] // the last entry; its write's seal follows
			return append(bytes.Clone(b[:f.off+11]), make([]byte, 1000)...), f.off
		},
		lost: 1,
	}, {
		name: "zeros over the last record",
		tear: func(b []byte, fr []frameInfo) ([]byte, int64) {
			f := fr[len(fr)-2] // the last entry; its write's seal follows
			b = bytes.Clone(b)
			clear(b[f.off+4:])
			return b, f.off
		},
		lost: 1,
	}, {
		name: "random garbage appended",
		tear: func(b []byte, fr []frameInfo) ([]byte, int64) {
			g := randomGarbage(rng, 1+rng.IntN(5000))
			// A declared length over 1 GiB: frame.Reader allocates what a
			// length up to 1 GiB declares before it reads.
			g[3] |= 0x80
			return append(bytes.Clone(b), g...), int64(len(b))
		},
	}, {
		name: "random garbage appended with a plausible length",
		tear: func(b []byte, fr []frameInfo) ([]byte, int64) {
			g := randomGarbage(rng, 100+rng.IntN(5000))
			binary.LittleEndian.PutUint32(g, uint32(len(g)+rng.IntN(100))) // past the end
			return append(bytes.Clone(b), g...), int64(len(b))
		},
	}, {
		name: "random garbage over the last record",
		tear: func(b []byte, fr []frameInfo) ([]byte, int64) {
			f := fr[len(fr)-2] // the last entry; its write's seal follows
			g := randomGarbage(rng, 8+rng.IntN(5000))
			binary.LittleEndian.PutUint32(g, uint32(len(g)+1))
			return append(bytes.Clone(b[:f.off]), g...), f.off
		},
		lost: 1,
	}, {
		name: "damaged last record",
		tear: func(b []byte, fr []frameInfo) ([]byte, int64) {
			// Damage in the last write cannot be told from a torn write,
			// even with the write's seal after it: the seal does not
			// verify.
			f := fr[len(fr)-2] // the last entry; its write's seal follows
			return flip(b, f.off+f.size/2), f.off
		},
		lost:      1,
		sealAfter: true,
	}, {
		name: "damaged last seal",
		tear: func(b []byte, fr []frameInfo) ([]byte, int64) {
			f := fr[len(fr)-1]
			return flip(b, f.off+f.size-6), f.off
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			l := newTestLog(t)
			name, b, fr := l.frames(t, -1)
			torn, size := tc.tear(b, fr)
			if _, ok := frame.NewFinder(torn[size:]).Next(frame.HeaderSize); ok != tc.sealAfter {
				t.Fatalf("test bug: a valid frame follows the damage: %v, want %v", ok, tc.sealAfter)
			}
			writeFile(t, l.m, name, torn)
			hs := l.lastHS
			if tc.hs != nil {
				hs = *tc.hs
			}
			checkTornOpen(t, l, name, size, l.entries[:len(l.entries)-tc.lost], hs)
		})
	}
}

// TestTornSectors loses a sector in the middle of a write, with frames of
// the write, its seal among them, after it, as a disk that writes sectors
// in any order may on a power loss. In the last write, that is a torn
// write: Open truncates it at the first damaged frame. Once a later write
// follows, made after this one was durable, it is damage.
func TestTornSectors(t *testing.T) {
	for _, later := range []bool{false, true} {
		m := vfs.NewMem()
		w, _ := mustOpen(t, m, wal.Options{}, 0)
		mustSave(t, w, entries(1, 3, 1), hardState(1, 1, 3))
		name := segments(t, m)[0]
		start := int64(len(readFile(t, m, name)))
		big := entries(4, 11, 1)
		for i := range big {
			big[i].Data = bytes.Repeat(big[i].Data, 20) // 8 entries of 20 to 820 bytes
		}
		mustSave(t, w, big, hardState(1, 1, 11))
		if later {
			mustSave(t, w, entries(12, 12, 1), hardState(1, 1, 12))
		}
		mustClose(t, w)
		b := readFile(t, m, name)
		sector := (start/vfs.SectorSize + 1) * vfs.SectorSize // inside the 8-entry write
		var first frameInfo
		for _, f := range framesOf(t, b) {
			if f.off+f.size > sector {
				first = f
				break
			}
		}
		clear(b[sector : sector+vfs.SectorSize])
		writeFile(t, m, name, b)
		var logBuf bytes.Buffer
		w, r, err := open(t, m, wal.Options{Logger: logger(&logBuf)}, 0)
		if later {
			checkWalError(t, err, name, first.off, durableDamage)
			continue
		}
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		kept := r.entries()
		if n := len(kept); n < 3 || n >= 11 || first.typ != typeEntry {
			t.Fatalf("replayed %s, with the first damaged frame of type %d: test bug", span(kept), first.typ)
		}
		checkEntries(t, "replay", kept, append(entries(1, 3, 1), big[:len(kept)-3]...))
		if got := int64(len(readFile(t, m, name))); got != first.off || !strings.Contains(logBuf.String(), "torn") {
			t.Fatalf("Open left %d bytes, want %d, and logged %q", got, first.off, logBuf.String())
		}
		mustClose(t, w)
	}
}

// checkTornOpen opens a log whose last segment, name, is torn, and checks
// that Open truncates it to size, logs it, replays want, and that the log
// goes on.
func checkTornOpen(t *testing.T, l *testLog, name string, size int64, want []raftpb.Entry, hs raftpb.HardState) {
	t.Helper()
	var logBuf bytes.Buffer
	w, r, err := open(t, l.m, wal.Options{Logger: logger(&logBuf)}, 0)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	checkEntries(t, "replay", r.entries(), want)
	if got := r.hardState(); got != hs {
		t.Fatalf("hard state %v, want %v", got, hs)
	}
	if got := int64(len(readFile(t, l.m, name))); got != size {
		t.Fatalf("Open left %s with %d bytes, want %d", name, got, size)
	}
	if s := logBuf.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "torn") || !strings.Contains(s, name) {
		t.Fatalf("Open logged %q, want a warning about the torn write", s)
	}
	last := want[len(want)-1].Index
	if mt := w.Metrics(); mt.LastIndex != last {
		t.Fatalf("LastIndex %d, want %d", mt.LastIndex, last)
	}
	// The truncation is durable, and the log goes on.
	more := entries(last+1, last+3, 3)
	mustSave(t, w, more, hardState(3, 1, last))
	mustClose(t, w)
	l.m.Crash()
	logBuf.Reset()
	w, r = mustOpen(t, l.m, wal.Options{Logger: logger(&logBuf)}, 0)
	defer mustClose(t, w)
	checkEntries(t, "replay after saving more", r.entries(), append(want[:len(want):len(want)], more...))
	if got := r.hardState(); got != hardState(3, 1, last) {
		t.Fatalf("hard state %v, want %v", got, hardState(3, 1, last))
	}
	if logBuf.Len() != 0 {
		t.Fatalf("reopening logged %s", logBuf.String())
	}
}

// TestTornSegmentStart tears a new last segment in its header or hard state:
// Open writes them again, so that the segment still starts with the hard
// state when the segments before it are deleted.
func TestTornSegmentStart(t *testing.T) {
	for _, cut := range []int64{0, 5, headerSize - 1, headerSize, headerSize + 3, headerSize + 9} {
		t.Run(itoa(cut), func(t *testing.T) {
			l := newTestLog(t)
			name, size := addTornStart(t, l, cut)
			checkTornOpen(t, l, name, size, l.entries, l.lastHS)

			// The segment starts with the hard state again: releasing
			// everything before it keeps it.
			w, _ := mustOpen(t, l.m, small, 0)
			if err := w.ReleaseTo(36); err != nil {
				t.Fatal(err)
			}
			mustClose(t, w)
			if segs := segments(t, l.m); segs[0] != name {
				t.Fatalf("after ReleaseTo(36) the log starts with %s, want %s", segs[0], name)
			}
			w, r := mustOpen(t, l.m, small, 36)
			defer mustClose(t, w)
			if !recEqual(r.recs[0], hsRec(l.lastHS)) {
				t.Fatalf("the segment starts with %v, want %v", r.recs[0], hsRec(l.lastHS))
			}
		})
	}
}

// addTornStart adds to l a new segment holding only its start, as rotation
// makes it, with just its first cut bytes written. It returns the
// segment's name and its size once Open has written its start again,
// sealed.
func addTornStart(t *testing.T, l *testLog, cut int64) (string, int64) {
	t.Helper()
	seq := uint64(len(l.segs) + 1)
	name := segName(seq, 37)
	hs := binary.AppendUvarint(nil, l.lastHS.Term)
	hs = binary.AppendUvarint(hs, l.lastHS.Vote)
	hs = binary.AppendUvarint(hs, l.lastHS.Commit)
	start := append(header("FLNTWAL1", walVersion, seq, 37), frame.Append(nil, typeHardState, hs)...)
	writeFile(t, l.m, name, start)
	if w, r := mustOpen(t, l.m, small, 0); !recEqual(r.recs[len(r.recs)-1], hsRec(l.lastHS)) {
		t.Fatalf("test bug: the new segment replays %v", r.recs[len(r.recs)-1])
	} else {
		mustClose(t, w)
	}
	writeFile(t, l.m, name, start[:cut])
	return name, int64(len(start) + sealFrameSize)
}

// randomGarbage returns n random bytes holding no valid frame.
func randomGarbage(rng *rand.Rand, n int) []byte {
	for {
		g := make([]byte, n)
		for i := range g {
			g[i] = byte(rng.IntN(256))
		}
		if _, ok := frame.NewFinder(g).Next(0); !ok {
			return g
		}
	}
}
