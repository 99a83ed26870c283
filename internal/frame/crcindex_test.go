package frame

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCRCIndex compares the index's checksums of random ranges with
// hash/crc32's.
func TestCRCIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	b := randomBytes(rng, 1<<16)
	x := newCRCIndex(b)
	for range 5000 {
		off := rng.IntN((len(b)-HeaderSize)/8) * 8
		n := rng.IntN(len(b) - off - HeaderSize + 1)
		want := crc32.Update(crc32.Checksum(b[off:off+4], castagnoli), castagnoli, b[off+HeaderSize:off+HeaderSize+n])
		if got := x.frameCRC(off, n); got != want {
			t.Fatalf("frameCRC(%d, %d) = %#x, want %#x", off, n, got, want)
		}
		if k := off + rng.IntN(len(b)-off+1); x.crcAt(k) != crc32.Checksum(b[:k], castagnoli) {
			t.Fatalf("crcAt(%d) is wrong", k)
		}
	}
}

// TestFinderCRC compares Finder.CRC of random ranges, and Combine of their
// halves, with hash/crc32's checksums.
func TestFinderCRC(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	b := randomBytes(rng, 1<<14)
	f := NewFinder(b)
	for range 2000 {
		s := rng.IntN(len(b) + 1)
		e := s + rng.IntN(len(b)-s+1)
		m := s + rng.IntN(e-s+1)
		want := crc32.Checksum(b[s:e], castagnoli)
		if got := f.CRC(s, e); got != want {
			t.Fatalf("CRC(%d, %d) = %#x, want %#x", s, e, got, want)
		}
		if got := Combine(crc32.Checksum(b[s:m], castagnoli), crc32.Checksum(b[m:e], castagnoli), e-m); got != want {
			t.Fatalf("Combine of [%d, %d) and [%d, %d) = %#x, want %#x", s, m, m, e, got, want)
		}
	}
}

// randomBytes returns n bytes drawn from rng.
func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return b
}

// TestFinderWalk walks every valid frame after damage with one Finder, as
// the log does to tell a torn write from damage.
func TestFinderWalk(t *testing.T) {
	b := Append(nil, 1, []byte("kept"))
	b = append(b, make([]byte, 24)...) // a lost sector: zeros
	for i := range 3 {
		b = Append(b, byte(2+i), make([]byte, 100*i+300)) // the longest go through the index
	}
	f := NewFinder(b)
	var types []byte
	for fr, ok := f.Next(Size(4)); ok; fr, ok = f.Next(int(fr.Offset) + Size(len(fr.Payload))) {
		types = append(types, fr.Type)
		if fr.Err != nil || len(fr.Payload) != 100*len(types)+200 {
			t.Fatalf("frame %d: %d bytes of payload, err %v", len(types), len(fr.Payload), fr.Err)
		}
	}
	if string(types) != "\x02\x03\x04" {
		t.Fatalf("walked frames of types %v, want 2, 3, 4", types)
	}
}

// TestFinderLongCandidates: a valid frame longer than directCheck is
// found through the index, behind damage that declares a plausible long
// frame at every offset.
func TestFinderLongCandidates(t *testing.T) {
	damage := make([]byte, 4096)
	for i := 0; i < len(damage); i += 8 {
		damage[i+1] = 0x10 // len 4096 at every offset: long, and fits
	}
	payload := make([]byte, 5000)
	for i := range payload {
		payload[i] = byte(i)
	}
	b := Append(append([]byte(nil), damage...), 7, payload)
	if off, ok := findValid(b, 0); !ok || off != len(damage) {
		t.Fatalf("Next = %d, %v; want %d, true", off, ok, len(damage))
	}
	b[len(damage)+HeaderSize+100] ^= 1
	if off, ok := findValid(b, 0); ok {
		t.Fatalf("Next found a frame at %d in a file whose only frame is damaged", off)
	}
}

// BenchmarkFinderAdversarial times Finder.Next over damage that declares
// a frame of half its size at every offset: quadratic if each candidate's
// body were checksummed (1.8 s for 1 MiB before the index).
func BenchmarkFinderAdversarial(b *testing.B) {
	const size = 1 << 20
	buf := make([]byte, size)
	for i := 0; i < size; i += 8 {
		buf[i+2] = size / 2 >> 16
	}
	b.SetBytes(size)
	for b.Loop() {
		if _, ok := findValid(buf, 0); ok {
			b.Fatal("found a valid frame in damage")
		}
	}
}
