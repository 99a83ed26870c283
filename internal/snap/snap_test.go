package snap_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/flintkv/flint/internal/frame"
	"github.com/flintkv/flint/internal/seedtest"
	"github.com/flintkv/flint/internal/snap"
	"github.com/flintkv/flint/internal/vfs"
	"go.etcd.io/raft/v3/raftpb"
)

// dir is the snapshot directory used by the tests.
const dir = "snap"

// pair is a key and its value.
type pair struct {
	key string
	val []byte
}

// pairsOf returns a snap.Pairs yielding ps.
func pairsOf(ps []pair) snap.Pairs {
	return func(yield func(string, []byte) bool) {
		for _, p := range ps {
			if !yield(p.key, p.val) {
				return
			}
		}
	}
}

// load loads the snapshot name in dir, returning its meta and pairs in key
// order. If Verify does not return the same meta, or the same error, or
// ReadFrom of the file's bytes the same meta and pairs, or an error at the
// same offset, it returns an error saying so, which is not a *snap.Error.
func load(fs vfs.FS, name string) (snap.Meta, []pair, error) {
	var mu sync.Mutex
	var ps []pair
	meta, err := snap.Load(fs, path.Join(dir, name), func(key, val []byte) {
		// key is valid only during the call; put runs on several goroutines.
		mu.Lock()
		defer mu.Unlock()
		ps = append(ps, pair{string(key), bytes.Clone(val)})
	})
	slices.SortFunc(ps, func(a, b pair) int { return strings.Compare(a.key, b.key) })
	if vmeta, verr := snap.Verify(fs, path.Join(dir, name)); !sameError(verr, err) || err == nil && !metaEqual(vmeta, meta) {
		return meta, ps, fmt.Errorf("Load and Verify disagree: Load %+v, %v; Verify %+v, %v", meta, err, vmeta, verr)
	}
	if serr := sameAsReadFrom(fs, path.Join(dir, name), meta, ps, err); serr != nil {
		return meta, ps, serr
	}
	return meta, ps, err
}

// sameAsReadFrom returns an error unless ReadFrom of the bytes of file
// name, in pieces, returns meta and ps (in key order), or an error at the
// offset of lerr.
func sameAsReadFrom(fs vfs.FS, name string, meta snap.Meta, ps []pair, lerr error) error {
	f, err := fs.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return err
	}
	var got []pair
	smeta, serr := snap.ReadFrom(iotest.HalfReader(io.NewSectionReader(f, 0, size)), func(key, val []byte) error {
		got = append(got, pair{string(key), bytes.Clone(val)})
		return nil
	})
	var sl, ss *snap.Error
	switch {
	case lerr == nil && serr == nil:
		if !metaEqual(smeta, meta) || !slices.EqualFunc(got, ps, func(a, b pair) bool { return a.key == b.key && bytes.Equal(a.val, b.val) }) {
			return fmt.Errorf("Load and ReadFrom disagree: Load %+v and %d pairs, ReadFrom %+v and %d pairs", meta, len(ps), smeta, len(got))
		}
	case !errors.As(lerr, &sl) || !errors.As(serr, &ss) || sl.Offset != ss.Offset:
		return fmt.Errorf("Load and ReadFrom disagree: Load %v, ReadFrom %v", lerr, serr)
	}
	return nil
}

// sameError reports whether a and b are both nil, or both a *snap.Error
// with the same contents.
func sameError(a, b error) bool {
	var sa, sb *snap.Error
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return errors.As(a, &sa) && errors.As(b, &sb) && *sa == *sb
}

// checkPairs fails unless got equals want.
func checkPairs(t testing.TB, got, want []pair) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("loaded %d pairs, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].key != want[i].key || !bytes.Equal(got[i].val, want[i].val) {
			t.Fatalf("pair %d is %q=%.20q (%d bytes), want %q=%.20q (%d bytes)", i,
				got[i].key, got[i].val, len(got[i].val), want[i].key, want[i].val, len(want[i].val))
		}
	}
}

// checkMeta fails unless got equals want.
func checkMeta(t testing.TB, got, want snap.Meta) {
	t.Helper()
	if !metaEqual(got, want) {
		t.Fatalf("meta %+v, want %+v", got, want)
	}
}

// metaEqual reports whether a and b are equal, taking nil and empty slices
// for equal.
func metaEqual(a, b snap.Meta) bool {
	ca, cb := a.Conf, b.Conf
	return a.Index == b.Index && a.Term == b.Term && ca.AutoLeave == cb.AutoLeave &&
		slices.Equal(ca.Voters, cb.Voters) && slices.Equal(ca.Learners, cb.Learners) &&
		slices.Equal(ca.VotersOutgoing, cb.VotersOutgoing) && slices.Equal(ca.LearnersNext, cb.LearnersNext) &&
		slices.EqualFunc(a.Sections, b.Sections, func(x, y snap.Section) bool { return x.Name == y.Name && bytes.Equal(x.Data, y.Data) })
}

// voters returns a configuration of voters alone.
func voters(ids ...uint64) raftpb.ConfState { return raftpb.ConfState{Voters: ids} }

// newMem returns a Mem holding an empty snapshot directory.
func newMem(t testing.TB) *vfs.Mem {
	t.Helper()
	m := vfs.NewMem()
	if err := vfs.MkdirAll(m, dir); err != nil {
		t.Fatal(err)
	}
	return m
}

// mustWrite writes a snapshot and checks its name and size.
func mustWrite(t testing.TB, fs vfs.FS, m *vfs.Mem, meta snap.Meta, ps []pair) string {
	t.Helper()
	name, size, err := snap.Write(fs, dir, meta, pairsOf(ps))
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if want := fmt.Sprintf("%016x-%016x.snap", meta.Index, meta.Term); name != want {
		t.Fatalf("Write named the snapshot %s, want %s", name, want)
	}
	if b := readFile(t, m, name); int64(len(b)) != size {
		t.Fatalf("Write says the snapshot has %d bytes, the file has %d", size, len(b))
	}
	return name
}

// files returns the names in dir.
func files(t testing.TB, fs vfs.FS) []string {
	t.Helper()
	names, err := fs.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func readFile(t testing.TB, m *vfs.Mem, name string) []byte {
	t.Helper()
	b, err := m.ReadFile(path.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t testing.TB, m *vfs.Mem, name string, b []byte) {
	t.Helper()
	if err := m.WriteFile(path.Join(dir, name), b); err != nil {
		t.Fatal(err)
	}
}

// randomPairs returns n pairs of random sizes, with an empty key, an empty
// value, both empty, and one value bigger than a pairs frame.
// randomPairs returns n or more pairs, edge cases among them, in ascending
// key order, as Write needs them.
func randomPairs(rng *rand.Rand, n int) []pair {
	ps := []pair{{"", []byte("empty key")}, {"empty value", nil}}
	for i := range n {
		key := fmt.Sprintf("key:%d:%s", i, strings.Repeat("k", rng.IntN(30)))
		val := make([]byte, rng.IntN(200))
		for j := range val {
			val[j] = byte(rng.IntN(256))
		}
		ps = append(ps, pair{key, val})
		if i == n/2 {
			big := make([]byte, 300<<10) // more than the 256 KiB chunk
			for j := range big {
				big[j] = byte(rng.IntN(256))
			}
			ps = append(ps, pair{"big", big})
		}
	}
	ps = append(ps, pair{strings.Repeat("K", 70000), []byte("long key")})
	slices.SortFunc(ps, func(a, b pair) int { return strings.Compare(a.key, b.key) })
	return ps
}

// frameInfo locates a frame in a file.
type frameInfo struct {
	off, size int64
	typ       byte
	payload   []byte
}

// framesOf parses the frames of a file, which must all be valid.
func framesOf(t testing.TB, b []byte) []frameInfo {
	t.Helper()
	var fs []frameInfo
	r := frame.NewScanner(b)
	for {
		off := r.Offset()
		typ, p, err := r.Next()
		if err != nil {
			return fs
		}
		fs = append(fs, frameInfo{off: off, size: r.Offset() - off, typ: typ, payload: bytes.Clone(p)})
	}
}

// snapError returns err as a *snap.Error, failing if it is not one.
func snapError(t testing.TB, err error) *snap.Error {
	t.Helper()
	var se *snap.Error
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is not a *snap.Error", err, err)
	}
	return se
}

// checkSnapError fails unless err is a *snap.Error for name at off whose
// reason contains each of the words.
func checkSnapError(t testing.TB, err error, name string, off int64, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Load succeeded, want an error at offset %d", off)
	}
	se := snapError(t, err)
	if path.Base(se.File) != name || se.Offset != off {
		t.Fatalf("error %q is for %s at offset %d, want %s at %d", err, se.File, se.Offset, name, off)
	}
	for _, w := range words {
		if !strings.Contains(se.Reason, w) {
			t.Fatalf("error %q does not mention %q", err, w)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 0))
	m := newMem(t)
	ps := randomPairs(rng, 5000)
	meta := snap.Meta{Index: 1<<40 + 3, Term: 77, Conf: jointConf, Sections: randomSections(rng)}
	name := mustWrite(t, m, m, meta, ps)
	got, gotPs, err := load(m, name)
	if err != nil {
		t.Fatal(err)
	}
	checkMeta(t, got, meta)
	checkPairs(t, gotPs, ps)

	// The header, the sections, the pairs and the end, in that order. The
	// pairs are in frames of about 256 KiB, or one pair; a section's data
	// in frames of at most 256 KiB.
	var types []byte
	var pairsFrames int
	for _, f := range framesOf(t, readFile(t, m, name)) {
		types = append(types, f.typ)
		switch {
		case f.typ == 2 && f.size > 256<<10+300<<10+1000: // the chunk, and the big pair
			t.Fatalf("a pairs frame of %d bytes", f.size)
		case (f.typ == 4 || f.typ == 5) && f.size > 256<<10+100:
			t.Fatalf("a section frame of %d bytes", f.size)
		case f.typ == 2:
			pairsFrames++
		}
	}
	if !regexp.MustCompile(`^\x01(\x04\x05*){4}\x02{3,}\x03$`).Match(types) {
		t.Fatalf("frames of types %v, want a header, 4 sections, several pairs frames, an end", types)
	}
}

// jointConf is a joint configuration, with every field set.
var jointConf = raftpb.ConfState{Voters: []uint64{1, 300, 1 << 63}, Learners: []uint64{4}, VotersOutgoing: []uint64{1, 2, 300},
	LearnersNext: []uint64{2}, AutoLeave: true}

// randomSections returns sections of random data: an empty one, small
// ones, and one that needs several frames.
func randomSections(rng *rand.Rand) []snap.Section {
	data := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	return []snap.Section{{Name: "members", Data: data(100)}, {Name: "sessions", Data: data(600 << 10)},
		{Name: "empty", Data: nil}, {Name: strings.Repeat("n", snap.MaxSectionName), Data: data(256 << 10)}}
}

func TestEmptyAndNoVoters(t *testing.T) {
	m := newMem(t)
	meta := snap.Meta{Index: 1, Term: 1}
	name := mustWrite(t, m, m, meta, nil)
	got, ps, err := load(m, name)
	if err != nil {
		t.Fatal(err)
	}
	checkMeta(t, got, meta)
	if len(ps) != 0 {
		t.Fatalf("an empty snapshot loaded %d pairs", len(ps))
	}
	if fr := framesOf(t, readFile(t, m, name)); len(fr) != 2 {
		t.Fatalf("an empty snapshot has %d frames, want a header and an end", len(fr))
	}
}

// TestWriteRejectsDisorder: Write needs keys in strictly ascending order,
// and leaves nothing behind when they are not.
func TestWriteRejectsDisorder(t *testing.T) {
	for _, ps := range [][]pair{
		{{"b", nil}, {"a", nil}},
		{{"a", []byte("1")}, {"a", []byte("2")}},
		{{"", nil}, {"", nil}},
	} {
		m := newMem(t)
		_, _, err := snap.Write(m, dir, snap.Meta{Index: 3, Term: 1}, pairsOf(ps))
		if err == nil || !strings.Contains(err.Error(), "out of order") {
			t.Fatalf("Write of keys %q, %q: err %v, want pairs out of order", ps[0].key, ps[1].key, err)
		}
		if names, err := m.ReadDir(dir); err != nil || len(names) != 0 {
			t.Fatalf("a failed Write left %v (%v)", names, err)
		}
	}
}

// TestWritePairTooLarge: a pair too large for a snapshot record fails the
// Write, which leaves nothing behind, rather than writing a file that Load
// would take for damaged.
func TestWritePairTooLarge(t *testing.T) {
	m := newMem(t)
	big := make([]byte, frame.MaxLen) // never touched
	_, _, err := snap.Write(m, dir, snap.Meta{Index: 3, Term: 1}, pairsOf([]pair{{"a", []byte("1")}, {"b", big}}))
	if err == nil || !strings.Contains(err.Error(), "more than a snapshot record can hold") {
		t.Fatalf("Write of a %d-byte value: %v, want refused", len(big), err)
	}
	if names, err := m.ReadDir(dir); err != nil || len(names) != 0 {
		t.Fatalf("a failed Write left %v (%v)", names, err)
	}
}

// TestWriteSameSnapshotAgain: a second Write of the snapshot at the same
// index (a SAVE with no write since the last) whose directory sync fails
// leaves the first in place, not a removed file.
func TestWriteSameSnapshotAgain(t *testing.T) {
	m := newMem(t)
	f := vfs.NewFaulty(m)
	meta := snap.Meta{Index: 3, Term: 1}
	ps := []pair{{"a", []byte("1")}}
	name, _, err := snap.Write(f, dir, meta, pairsOf(ps))
	if err != nil {
		t.Fatal(err)
	}
	f.FailSyncDir(syscall.EIO)
	if _, _, err := snap.Write(f, dir, meta, pairsOf(ps)); err == nil {
		t.Fatal("Write succeeded with a failing directory sync")
	}
	f.Heal()
	if got := files(t, m); !slices.Equal(got, []string{name}) {
		t.Fatalf("after the failed second Write the directory holds %v, want %s", got, name)
	}
	if _, err := snap.Load(m, path.Join(dir, name), func(_, _ []byte) {}); err != nil {
		t.Fatal(err)
	}
}

// TestWriteOS writes and loads a snapshot on the real filesystem.
func TestWriteOS(t *testing.T) {
	d := t.TempDir()
	ps := randomPairs(rand.New(rand.NewPCG(1, 2)), 100)
	meta := snap.Meta{Index: 9, Term: 2, Conf: voters(1), Sections: []snap.Section{{Name: "members", Data: []byte("1=localhost:7000")}}}
	name, _, err := snap.Write(vfs.OS, d, meta, pairsOf(ps))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []pair
	gotMeta, err := snap.Load(vfs.OS, path.Join(d, name), func(k, v []byte) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, pair{string(k), bytes.Clone(v)})
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b pair) int { return strings.Compare(a.key, b.key) })
	checkMeta(t, gotMeta, meta)
	checkPairs(t, got, ps)
	infos, err := snap.List(vfs.OS, d)
	if err != nil || len(infos) != 1 || infos[0].Name != name {
		t.Fatalf("List = %v, %v", infos, err)
	}
}

func TestListAndPrune(t *testing.T) {
	m := newMem(t)
	ps := []pair{{"k", []byte("v")}}
	var names []string
	for _, it := range [][2]uint64{{10, 2}, {5, 1}, {300, 3}, {7, 1}, {256, 3}} {
		names = append(names, mustWrite(t, m, m, snap.Meta{Index: it[0], Term: it[1]}, ps))
	}
	writeFile(t, m, names[0]+".tmp", []byte("partial"))
	writeFile(t, m, "0000000000000400-0000000000000004.snap.tmp", nil)
	writeFile(t, m, "README", []byte("not a snapshot"))
	if err := vfs.MkdirAll(m, path.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}

	infos, err := snap.List(m, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []snap.Info{
		{Name: names[1], Index: 5, Term: 1},
		{Name: names[3], Index: 7, Term: 1},
		{Name: names[0], Index: 10, Term: 2},
		{Name: names[4], Index: 256, Term: 3},
		{Name: names[2], Index: 300, Term: 3},
	}
	if !slices.Equal(infos, want) {
		t.Fatalf("List = %v, want %v", infos, want)
	}

	// Prune keeps the newest, deletes every .tmp, and leaves other files.
	if err := snap.Prune(m, dir, 10); err != nil {
		t.Fatal(err)
	}
	if infos, _ := snap.List(m, dir); !slices.Equal(infos, want) {
		t.Fatalf("Prune(10) left %v, want %v", infos, want)
	}
	for _, f := range files(t, m) {
		if strings.HasSuffix(f, ".tmp") {
			t.Fatalf("Prune left %s", f)
		}
	}
	if err := snap.Prune(m, dir, 2); err != nil {
		t.Fatal(err)
	}
	m.Crash() // the deletions are durable
	if got, want := files(t, m), []string{names[4], names[2], "README", "sub"}; !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("after Prune(2) and a crash the directory holds %v, want %v", got, want)
	}
	if _, ps2, err := load(m, names[2]); err != nil {
		t.Fatal(err)
	} else {
		checkPairs(t, ps2, ps)
	}
	if err := snap.Prune(m, dir, 0); err != nil {
		t.Fatal(err)
	}
	if infos, err := snap.List(m, dir); err != nil || len(infos) != 0 {
		t.Fatalf("after Prune(0), List = %v, %v", infos, err)
	}
	if infos, err := snap.List(m, "missing"); err == nil {
		t.Fatalf("List of a missing directory = %v", infos)
	}
}

func TestListRejectsBadNames(t *testing.T) {
	for _, bad := range []string{
		"abc.snap",
		".snap",
		"000000000000000a-0000000000000001.snap0.snap",
		"000000000000000A-0000000000000001.snap",  // upper case
		"00000000000000a-0000000000000001.snap",   // 15 digits
		"000000000000000a-00000000000000001.snap", // 17 digits
		"000000000000000a_0000000000000001.snap",
		"000000000000000a-0000000000000001x.snap",
		"x000000000000000a-0000000000000001.snap",
	} {
		m := newMem(t)
		mustWrite(t, m, m, snap.Meta{Index: 1, Term: 1}, nil)
		writeFile(t, m, bad, nil)
		infos, err := snap.List(m, dir)
		if err == nil {
			t.Fatalf("List accepted %q: %v", bad, infos)
		}
		if se := snapError(t, err); path.Base(se.File) != bad {
			t.Fatalf("List's error %q names %s, want %s", err, se.File, bad)
		}
		if err := snap.Prune(m, dir, 1); err == nil {
			t.Fatalf("Prune accepted %q", bad)
		}
	}
}

// TestTruncated cuts a snapshot at many points: Load reports truncation at
// the offset of the frame that is cut, or of the missing end frame.
func TestTruncated(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 0))
	m := newMem(t)
	name := mustWrite(t, m, m, snap.Meta{Index: 3, Term: 1, Conf: jointConf, Sections: randomSections(rng)}, randomPairs(rng, 3000))
	good := readFile(t, m, name)
	fr := framesOf(t, good)
	endFrame := fr[len(fr)-1]
	cuts := []int64{0, 1, 7, 8, 9, fr[0].size - 1, fr[0].size, fr[0].size + 3, fr[1].off + fr[1].size/2,
		fr[2].off, endFrame.off - 1, endFrame.off, endFrame.off + 4, endFrame.off + 8, int64(len(good)) - 1}
	for range 20 {
		cuts = append(cuts, rng.Int64N(int64(len(good))))
	}
	for _, cut := range cuts {
		writeFile(t, m, name, good[:cut])
		_, _, err := load(m, name)
		// The frame the cut falls in, or the one that would follow.
		want := int64(len(good))
		for _, f := range fr {
			if cut < f.off+f.size {
				want = f.off
				break
			}
		}
		if err == nil {
			t.Fatalf("Load of the snapshot cut at %d of %d succeeded", cut, len(good))
		}
		checkSnapError(t, err, name, want, "truncated")
	}
}

// TestDamaged flips bytes: Load reports the frame that holds them.
func TestDamaged(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 0))
	m := newMem(t)
	name := mustWrite(t, m, m, snap.Meta{Index: 3, Term: 1, Conf: jointConf, Sections: randomSections(rng)}, randomPairs(rng, 1000))
	good := readFile(t, m, name)
	fr := framesOf(t, good)
	for range 30 {
		i := rng.IntN(len(fr))
		f := fr[i]
		// A byte of the frame's length, checksum, type or payload (not its
		// padding, which is not checked).
		at := f.off + rng.Int64N(frame.HeaderSize+1+int64(len(f.payload)))
		bad := bytes.Clone(good)
		bad[at] ^= 1 << rng.IntN(8)
		writeFile(t, m, name, bad)
		_, _, err := load(m, name)
		if err == nil {
			t.Fatalf("Load of the snapshot with byte %d flipped succeeded", at)
		}
		se := snapError(t, err)
		if se.Offset != f.off {
			t.Fatalf("byte %d flipped in frame %d at %d: error %q", at, i, f.off, err)
		}
	}
	// A flipped byte in the middle, as the brief example.
	bad := bytes.Clone(good)
	mid := int64(len(good) / 2)
	var in frameInfo
	for _, f := range fr {
		if mid >= f.off && mid < f.off+f.size {
			in = f
		}
	}
	if mid >= in.off+frame.HeaderSize+1+int64(len(in.payload)) {
		mid = in.off + frame.HeaderSize + 1 // not in the padding, which is not checked
	}
	bad[mid] ^= 0xff
	writeFile(t, m, name, bad)
	_, _, err := load(m, name)
	checkSnapError(t, err, name, in.off, "checksum")
}

// build returns a snapshot file made of the frames given.
func build(frames ...[]byte) []byte {
	var b []byte
	for _, f := range frames {
		b = append(b, f...)
	}
	return b
}

// header returns a version 1 header frame, or one of another version with
// the same fields.
func header(magic string, version uint32, index, term uint64, voters ...uint64) []byte {
	p := append([]byte(magic), binary.LittleEndian.AppendUint32(nil, version)...)
	p = binary.LittleEndian.AppendUint64(p, index)
	p = binary.LittleEndian.AppendUint64(p, term)
	p = binary.AppendUvarint(p, uint64(len(voters)))
	for _, v := range voters {
		p = binary.AppendUvarint(p, v)
	}
	return frame.Append(nil, 1, p)
}

func pairsFrame(kvs ...string) []byte {
	var p []byte
	for _, s := range kvs {
		p = binary.AppendUvarint(p, uint64(len(s)))
		p = append(p, s...)
	}
	return frame.Append(nil, 2, p)
}

func endFrame(count, n uint64) []byte {
	return frame.Append(nil, 3, binary.AppendUvarint(binary.AppendUvarint(nil, count), n))
}

// TestBadContent loads files of valid frames with bad contents. Their
// headers are of version 1 (see TestBadContentV2 for version 2's); their
// pairs and end frames are the same in both versions.
func TestBadContent(t *testing.T) {
	hdr := header("FLNTSNP1", 1, 5, 2, 1)
	pf := pairsFrame("a", "1", "bb", "22")
	h, p, e := int64(len(hdr)), int64(len(pf)), int64(len(endFrame(2, 6)))
	// The header payload up to the voter count.
	fixed := func(tail ...byte) []byte {
		return append(slices.Clone(header("FLNTSNP1", 1, 5, 2)[frame.HeaderSize+1:][:28]), tail...)
	}
	for _, tc := range []struct {
		name  string
		file  []byte
		off   int64
		words []string
	}{
		{"valid", build(hdr, pf, endFrame(2, 6)), -1, nil},
		{"valid with an empty pairs frame", build(hdr, frame.Append(nil, 2, nil), pf, endFrame(2, 6)), -1, nil},
		{"count mismatch", build(hdr, pf, endFrame(3, 6)), h + p, []string{"counts 3 pairs of 6 bytes", "holds 2 of 6"}},
		{"bytes mismatch", build(hdr, pf, endFrame(2, 7)), h + p, []string{"counts 2 pairs of 7 bytes"}},
		{"end without pairs", build(hdr, endFrame(1, 2)), h, []string{"counts 1 pairs"}},
		{"bad end record", build(hdr, pf, frame.Append(nil, 3, []byte{2})), h + p, []string{"bad end record"}},
		{"end record too long", build(hdr, pf, frame.Append(nil, 3, []byte{2, 6, 0})), h + p, []string{"bad end record"}},
		{"bad magic", build(header("FLNTSNP2", 1, 5, 2, 1), pf, endFrame(2, 6)), 0, []string{"bad magic"}},
		{"a log segment", build(header("FLNTWAL1", 1, 5, 2, 1), pf, endFrame(2, 6)), 0, []string{"bad magic"}},
		{"bad version", build(header("FLNTSNP1", 3, 5, 2, 1), pf, endFrame(2, 6)), 0, []string{"version 3"}},
		{"short header", build(frame.Append(nil, 1, []byte("FLNTSNP1\x01\x00\x00\x00")), endFrame(0, 0)), 0, []string{"bad magic"}},
		{"bad voter count", build(frame.Append(nil, 1, fixed(5, 1)), endFrame(0, 0)), 0, []string{"voter"}},
		{"trailing header bytes", build(frame.Append(nil, 1, fixed(1, 9, 7)), endFrame(0, 0)), 0, []string{"trailing"}},
		{"no header", build(pf, endFrame(2, 6)), 0, []string{"does not start with a snapshot header"}},
		{"two headers", build(hdr, hdr, pf, endFrame(2, 6)), h, []string{"unknown frame type 1"}},
		{"unknown frame type", build(hdr, pf, frame.Append(nil, 9, []byte("x")), endFrame(2, 6)), h + p, []string{"unknown frame type 9"}},
		{"bad key length", build(hdr, frame.Append(nil, 2, []byte{5, 'a'}), endFrame(0, 0)), h, []string{"bad key"}},
		{"bad value length", build(hdr, frame.Append(nil, 2, []byte{1, 'a', 9, 'b'}), endFrame(0, 0)), h, []string{"bad value"}},
		{"key without value", build(hdr, frame.Append(nil, 2, []byte{1, 'a'}), endFrame(0, 0)), h, []string{"bad value"}},
		{"keys out of order in a frame", build(hdr, pairsFrame("bb", "22", "a", "1"), endFrame(2, 6)), h, []string{`key "a" follows key "bb"`, "not in ascending order"}},
		{"a key twice in a frame", build(hdr, pairsFrame("a", "1", "a", "22"), endFrame(2, 4)), h, []string{`key "a" follows key "a"`}},
		{"frames out of order", build(hdr, pairsFrame("bb", "22"), pairsFrame("a", "1"), endFrame(2, 6)), h + int64(len(pairsFrame("bb", "22"))), []string{`key "a" follows key "bb"`}},
		{"a key in two frames", build(hdr, pairsFrame("a", "1"), frame.Append(nil, 2, nil), pairsFrame("a", "1"), endFrame(2, 4)), h + int64(len(pairsFrame("a", "1"))+frame.Size(0)), []string{`key "a" follows key "a"`}},
		{"frames out of order, then a bad frame", build(hdr, pairsFrame("bb", "22"), pairsFrame("a", "1"), frame.Append(nil, 2, []byte{5, 'a'}), endFrame(2, 6)), h + int64(len(pairsFrame("bb", "22"))), []string{`key "a" follows key "bb"`}},
		{"a bad frame, then frames out of order", build(hdr, frame.Append(nil, 2, []byte{5, 'a'}), pairsFrame("bb", "22"), pairsFrame("a", "1"), endFrame(2, 6)), h, []string{"bad key"}},
		{"huge key length", build(hdr, frame.Append(nil, 2, binary.AppendUvarint(nil, 1<<63)), endFrame(0, 0)), h, []string{"bad key"}},
		{"data after the end", build(hdr, pf, endFrame(2, 6), pf), h + p + e, []string{"data after the end record"}},
		{"zeros after the end", build(hdr, pf, endFrame(2, 6), make([]byte, 8)), h + p + e, []string{"data after the end record"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem(t)
			name := "0000000000000005-0000000000000002.snap"
			writeFile(t, m, name, tc.file)
			meta, ps, err := load(m, name)
			if tc.off < 0 {
				if err != nil {
					t.Fatal(err)
				}
				checkMeta(t, meta, snap.Meta{Index: 5, Term: 2, Conf: voters(1)})
				checkPairs(t, ps, []pair{{"a", []byte("1")}, {"bb", []byte("22")}})
				return
			}
			checkSnapError(t, err, name, tc.off, tc.words...)
		})
	}
}

// TestCrash crashes after a Write: the snapshot is there, whole. A Write
// that fails leaves no snapshot, and the previous one still loads.
func TestCrash(t *testing.T) {
	rng := rand.New(rand.NewPCG(seedtest.Seed(t), 0))
	m := newMem(t)
	f := vfs.NewFaulty(m)
	meta1 := snap.Meta{Index: 10, Term: 1, Conf: voters(1)}
	ps1 := randomPairs(rng, 2000)
	name1 := mustWrite(t, f, m, meta1, ps1)
	m.CrashWith(rng)
	if got := files(t, m); !slices.Equal(got, []string{name1}) {
		t.Fatalf("after a crash the directory holds %v, want %v", got, name1)
	}
	check1 := func() {
		t.Helper()
		infos, err := snap.List(m, dir)
		if err != nil || len(infos) != 1 || infos[0].Name != name1 {
			t.Fatalf("List = %v, %v; want only %s", infos, err, name1)
		}
		meta, ps, err := load(m, name1)
		if err != nil {
			t.Fatal(err)
		}
		checkMeta(t, meta, meta1)
		checkPairs(t, ps, ps1)
	}
	check1()

	meta2 := snap.Meta{Index: 20, Term: 1, Conf: voters(1)}
	name2 := fmt.Sprintf("%016x-%016x.snap", meta2.Index, meta2.Term)
	ps2 := randomPairs(rng, 2000)
	for _, tc := range []struct {
		name string
		arm  func()
	}{
		{"sync fails", func() { f.FailSync(syscall.EIO) }},
		{"write fails", func() { f.FailWrite(syscall.EIO) }},
		{"write fails midway", func() { f.FailAfterBytes(300<<10, syscall.EIO) }},
		{"disk full", func() { m.SetCapacity(int64(len(readFile(t, m, name1))) + 1000) }},
		{"directory sync fails", func() { f.FailSyncDir(syscall.EIO) }},
	} {
		tc.arm()
		_, _, err := snap.Write(f, dir, meta2, pairsOf(ps2))
		f.Heal()
		m.SetCapacity(0)
		if err == nil {
			t.Fatalf("%s: Write succeeded", tc.name)
		}
		if tc.name == "disk full" && !vfs.IsNoSpace(err) {
			t.Fatalf("%s: Write's error %v is not a full disk", tc.name, err)
		}
		if !strings.Contains(err.Error(), name2) {
			t.Fatalf("%s: Write's error %q does not name the snapshot", tc.name, err)
		}
		// Nothing is left behind, not even the .tmp file.
		if got := files(t, m); !slices.Equal(got, []string{name1}) {
			t.Fatalf("%s: after a failed Write the directory holds %v", tc.name, got)
		}
		m.CrashWith(rng)
		for _, n := range files(t, m) {
			switch {
			case n == name1 || n == name2+".tmp":
			case n == name2 && tc.name == "directory sync fails":
				// The crash kept the rename but not the removal that
				// undid it: the snapshot must be whole.
				if _, ps, err := load(m, name2); err != nil {
					t.Fatalf("%s: the snapshot a crash kept: %v", tc.name, err)
				} else {
					checkPairs(t, ps, ps2)
				}
				if err := m.Remove(path.Join(dir, name2)); err != nil {
					t.Fatal(err)
				}
				if err := m.SyncDir(dir); err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("%s: after a failed Write and a crash the directory holds %s", tc.name, n)
			}
		}
		if err := snap.Prune(m, dir, 1); err != nil {
			t.Fatal(err)
		}
		check1()
	}

	// A crash in the middle of a Write, before its fsync, leaves at most
	// a .tmp file.
	var crashed bool
	_, _, err := snap.Write(f, dir, meta2, func(yield func(string, []byte) bool) {
		for i, p := range ps2 {
			if i == len(ps2)/2 {
				m.CrashWith(rng) // the Write's handle is stale from now on
				crashed = true
			}
			if !yield(p.key, p.val) {
				return
			}
		}
	})
	if err == nil || !crashed || !errors.Is(err, vfs.ErrStaleHandle) {
		t.Fatalf("Write across a crash returned %v", err)
	}
	m.Crash()
	for _, n := range files(t, m) {
		if n != name1 && n != name2+".tmp" {
			t.Fatalf("after a crash during Write the directory holds %s", n)
		}
	}
	check1()

	// Write succeeds again, and survives a crash.
	name2got := mustWrite(t, m, m, meta2, ps2)
	m.CrashWith(rng)
	if _, ps, err := load(m, name2got); err != nil {
		t.Fatal(err)
	} else {
		checkPairs(t, ps, ps2)
	}
}

// TestCountHint reads the pair count from the end record alone, and only
// from a file that ends with a valid one.
func TestCountHint(t *testing.T) {
	m := newMem(t)
	ps := randomPairs(rand.New(rand.NewPCG(seedtest.Seed(t), 0)), 300)
	name := mustWrite(t, m, m, snap.Meta{Index: 3, Term: 1}, ps)
	if n, ok := snap.CountHint(m, path.Join(dir, name)); !ok || n != uint64(len(ps)) {
		t.Fatalf("CountHint = %d, %v; want %d, true", n, ok, len(ps))
	}
	empty := mustWrite(t, m, m, snap.Meta{Index: 4, Term: 1}, nil)
	if n, ok := snap.CountHint(m, path.Join(dir, empty)); !ok || n != 0 {
		t.Fatalf("CountHint of an empty snapshot = %d, %v; want 0, true", n, ok)
	}
	good := readFile(t, m, name)
	for _, bad := range [][]byte{good[:len(good)-8], good[:len(good)-1], append(slices.Clone(good), make([]byte, 8)...), good[:12], nil} {
		writeFile(t, m, name, bad)
		if n, ok := snap.CountHint(m, path.Join(dir, name)); ok {
			t.Fatalf("CountHint of a file of %d bytes without its end record = %d, true", len(bad), n)
		}
	}
	if _, ok := snap.CountHint(m, path.Join(dir, "missing.snap")); ok {
		t.Fatal("CountHint of a missing file is ok")
	}
}

// TestVersion1File loads testdata/v1/000000000000002a-0000000000000007.snap,
// written by snap.Write of format version 1 (at cef2afa) with the meta and
// pairs below: files of that version must load as long as Flint reads them.
func TestVersion1File(t *testing.T) {
	m := newMem(t)
	name := "000000000000002a-0000000000000007.snap"
	b, err := os.ReadFile(path.Join("testdata/v1", name))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, m, name, b)
	meta, ps, err := load(m, name)
	if err != nil {
		t.Fatal(err)
	}
	checkMeta(t, meta, snap.Meta{Index: 42, Term: 7, Conf: voters(1, 2, 300)})
	checkPairs(t, ps, []pair{{"", []byte("empty key")}, {"a", []byte("1")}, {"empty value", nil}, {"key", []byte("value")}, {"zz", []byte("last")}})
}
