package wal_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/frame"
	"github.com/flintkv/flint/internal/seedtest"
	"github.com/flintkv/flint/internal/vfs"
	"github.com/flintkv/flint/internal/wal"
)

// randomEntry returns entry index of term with 1 to 1,500 bytes of data,
// so that writes span sectors.
func randomEntry(rng *rand.Rand, index, term uint64) raftpb.Entry {
	n := 1 + rng.IntN(1500)
	if rng.IntN(3) == 0 {
		n = 1 + rng.IntN(40)
	}
	data := bytes.Repeat([]byte{byte('a' + index%26)}, n)
	copy(data, fmt.Sprintf("%d/%d", index, term))
	return raftpb.Entry{Index: index, Term: term, Data: data}
}

// TestSealsRandom runs logs through random lives: Appends and Saves of
// entries of up to 1,500 bytes, raft truncations, Syncs, disks that fill up
// during a write, rotations, preallocated segments and NoSync, each life
// ending in a Close, a power loss that tears a prefix, or one that tears
// sectors. After each life every seal must verify, and Open must succeed
// and replay a prefix of what was written that holds everything synced.
func TestSealsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 1))
	for iter := range 40 {
		m := vfs.NewMem()
		var want []raftpb.Entry
		durable, term, commit := 0, uint64(1), uint64(0)
		for life := range 12 {
			opt := wal.Options{SegmentSize: int64(300 + rng.IntN(6000)), NoSync: rng.IntN(4) == 0, Preallocate: rng.IntN(2) == 0}
			w, r := mustOpen(t, m, opt, 0)
			got := r.entries()
			if len(got) < durable || len(got) > len(want) {
				t.Fatalf("iteration %d, life %d: replayed %d entries, want %d to %d", iter, life, len(got), durable, len(want))
			}
			checkEntries(t, fmt.Sprintf("iteration %d, life %d", iter, life), got, want[:len(got)])
			want, durable = want[:len(got)], len(got)
			logLen := uint64(len(r.log()))
			term++
			for range 1 + rng.IntN(25) {
				next := logLen + 1
				if rng.IntN(8) == 0 && next > 3 {
					next -= uint64(1 + rng.IntN(2)) // raft truncates the log
				}
				var es []raftpb.Entry
				for i := range rng.IntN(4) {
					es = append(es, randomEntry(rng, next+uint64(i), term))
				}
				if rng.IntN(2) == 0 {
					commit = max(commit, logLen)
				}
				if rng.IntN(6) == 0 {
					m.SetCapacity(usage(t, m) + int64(rng.IntN(3000))) // full, or nearly
				}
				save := rng.IntN(3) == 0
				var err error
				if save {
					err = w.Save(es, hardState(term, 1, commit))
				} else {
					err = w.Append(es, hardState(term, 1, commit))
				}
				m.SetCapacity(0)
				if vfs.IsNoSpace(err) {
					continue // the log is as it was
				}
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, es...)
				logLen = uint64(len(applyLog(r.log(), want[len(got):])))
				if rng.IntN(6) == 0 {
					save = true
					if err := w.Sync(); err != nil {
						t.Fatal(err)
					}
				}
				if save && !opt.NoSync {
					durable = len(want)
				}
			}
			checkSeals(t, m, fmt.Sprintf("iteration %d, life %d", iter, life))
			switch rng.IntN(3) {
			case 0:
				m.CrashWith(rng)
			case 1:
				m.CrashSectors(rng)
			}
			w.Close()
		}
	}
}

// seal is a seal's offset and from.
type seal struct{ off, from int64 }

// checkSeals checks every seal of every segment in m: from is the end of a
// frame before it, and its cover is the CRC-32C of the segment's seq and
// first followed by the segment's bytes from from to it. It returns the
// seals of the last segment.
func checkSeals(t *testing.T, m *vfs.Mem, what string) (last []seal) {
	t.Helper()
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	for _, name := range segments(t, m) {
		b := readFile(t, m, name)
		id := binary.LittleEndian.AppendUint64(nil, segmentSeq(t, name))
		id = binary.LittleEndian.AppendUint64(id, segmentFirst(t, name))
		ends := map[int64]bool{0: true}
		last = nil
		for _, f := range framesOf(t, b) {
			ends[f.off+f.size] = true
			if f.typ != typeSeal {
				continue
			}
			p := b[f.off+frame.HeaderSize+1:]
			from, cover := int64(binary.LittleEndian.Uint64(p)), binary.LittleEndian.Uint32(p[8:])
			if !ends[from] || crc32.Update(crc32.Checksum(id, castagnoli), castagnoli, b[from:f.off]) != cover {
				t.Fatalf("%s: %s: the seal at %d, from %d, does not verify", what, name, f.off, from)
			}
			last = append(last, seal{f.off, from})
		}
	}
	return last
}

// TestSealsBitRot writes a log of random Appends and Saves, then flips a
// byte of a frame in its last segment: Open must report damage exactly
// when a seal after that frame starts past it, and otherwise truncate the
// frame as a torn write and replay a prefix of the log.
func TestSealsBitRot(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 2))
	for iter := range 150 {
		m := vfs.NewMem()
		opt := wal.Options{SegmentSize: int64(2000 + rng.IntN(20000)), Preallocate: rng.IntN(2) == 0, NoSync: rng.IntN(5) == 0}
		w, _ := mustOpen(t, m, opt, 0)
		var want []raftpb.Entry
		for range 1 + rng.IntN(30) {
			next := uint64(len(want)) + 1
			var es []raftpb.Entry
			for i := range rng.IntN(4) {
				es = append(es, randomEntry(rng, next+uint64(i), 1))
			}
			write := w.Append
			if rng.IntN(3) == 0 {
				write = w.Save
			}
			if err := write(es, hardState(1, 1, uint64(len(want)))); err != nil {
				t.Fatal(err)
			}
			want = append(want, es...)
		}
		mustClose(t, w)
		seals := checkSeals(t, m, fmt.Sprintf("iteration %d", iter))
		segs := segments(t, m)
		name := segs[len(segs)-1]
		orig := readFile(t, m, name)
		frames := framesOf(t, orig)
		for range 20 {
			f := frames[rng.IntN(len(frames))]
			n := int64(binary.LittleEndian.Uint32(orig[f.off:])) // the frame without its padding
			b := bytes.Clone(orig)
			b[f.off+rng.Int64N(frame.HeaderSize+n)] ^= byte(1 + rng.IntN(255))
			writeFile(t, m, name, b)
			damage := false
			for _, s := range seals {
				damage = damage || (s.off > f.off && s.from > f.off)
			}
			w, r, err := open(t, m, opt, 0)
			if damage != (err != nil) {
				t.Fatalf("iteration %d: a byte flipped in the frame at %d (type %d): Open returned %v, want damage: %v; seals %v", iter, f.off, f.typ, err, damage, seals)
			}
			if err == nil {
				got := r.entries()
				checkEntries(t, "replay after the flip", got, want[:len(got)])
				mustClose(t, w)
			}
			writeFile(t, m, name, orig)
		}
	}
}
