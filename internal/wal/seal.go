package wal

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/flintkv/flint/internal/frame"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sealSize is the length of a seal's payload: from, then the cover's CRC.
const sealSize = 12

// sealer makes the seal that ends each write to one segment (see the
// format). A write's seal covers the segment from the first byte not known
// to be durable when the write was made to the seal itself; so a whole
// seal after damage, whose cover starts after the damage, shows that the
// damaged bytes were durable: damage, not a torn write.
//
// Invariant: crc is the CRC-32C of the segment's identity (coverSeed)
// followed by the segment's bytes from from to the end of the last write.
type sealer struct {
	seed uint32 // coverSeed of the segment
	from int64  // the first byte of the segment not known to be durable
	crc  uint32
}

// newSealer returns the sealer of segment seq-first, durable up to from.
func newSealer(seq, first uint64, from int64) sealer {
	s := sealer{seed: coverSeed(seq, first)}
	s.reset(from)
	return s
}

// reset records that the segment is durable up to off.
func (s *sealer) reset(off int64) { s.from, s.crc = off, s.seed }

// close appends to b, the frames of one write, the seal that ends it, and
// adds the whole write to what the next seal covers.
func (s *sealer) close(b []byte) []byte {
	s.crc = crc32.Update(s.crc, castagnoli, b)
	p := binary.LittleEndian.AppendUint64(make([]byte, 0, sealSize), uint64(s.from))
	p = binary.LittleEndian.AppendUint32(p, s.crc)
	start := len(b)
	b = frame.Append(b, typeSeal, p)
	s.crc = crc32.Update(s.crc, castagnoli, b[start:])
	return b
}

// coverSeed is the CRC-32C of a segment's seq and first, 8 bytes each,
// little-endian, with which every cover of the segment starts: a seal
// copied from another segment does not verify.
func coverSeed(seq, first uint64) uint32 {
	id := binary.LittleEndian.AppendUint64(nil, seq)
	return crc32.Checksum(binary.LittleEndian.AppendUint64(id, first), castagnoli)
}

// decodeSeal returns a seal's from and cover CRC.
func decodeSeal(p []byte) (from int64, crc uint32, ok bool) {
	if len(p) != sealSize {
		return 0, 0, false
	}
	return int64(binary.LittleEndian.Uint64(p)), binary.LittleEndian.Uint32(p[8:]), true
}

// sealedAfter returns the offset of a whole seal in b, segment s as
// mapped, whose cover starts after damage at off; if there is one, the
// damage is not a torn write. Its cost is linear in len(b) (frame.Finder).
func sealedAfter(b []byte, s segment, off int64) (int64, bool) {
	f := frame.NewFinder(b)
	seed := coverSeed(s.seq, s.first)
	for fr, ok := f.Next(int(off) + 1); ok; fr, ok = f.Next(int(fr.Offset) + frame.Size(len(fr.Payload))) {
		// A cover that starts at or before off holds the damage and
		// cannot verify: skip it without checksumming it.
		from, crc, valid := decodeSeal(fr.Payload)
		if fr.Type != typeSeal || !valid || from <= off || from > fr.Offset {
			continue
		}
		if frame.Combine(seed, f.CRC(int(from), int(fr.Offset)), int(fr.Offset-from)) == crc {
			return fr.Offset, true
		}
	}
	return 0, false
}
