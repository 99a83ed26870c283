// Package frame is the checksummed record framing shared by Flint's log
// segments and snapshot files.
//
// A file is a sequence of frames. Each frame is
//
//	+------------+------------+------+---------+---------+
//	| len uint32 | crc uint32 | type | payload | padding |
//	+------------+------------+------+---------+---------+
//	  4 bytes LE   4 bytes LE   1 B    len-1 B   0-7 B
//
// len counts the type byte and the payload, so it is never zero: a zero len
// is never a frame. crc is the CRC-32C (Castagnoli) of the four len bytes, the
// type byte and the payload, so a damaged length is caught like damaged data.
// Zero bytes pad the frame to a multiple of 8 bytes; frames therefore start
// at offsets that are multiples of 8, which bounds the search for a valid
// frame after a damaged one (see Finder). The meaning of types and
// payloads belongs to the file format that uses the frames.
//
// Zeros from the end of a frame to the end of the file are not a frame but
// space written ahead of time for frames to come: a reader ends there as at
// the end of the file. (A writer may fill a file with zeros and then write
// frames over them from the start, so that appending never changes the
// file's size, which makes each fdatasync cheaper: there is no new size to
// commit to the filesystem's journal.) Since no frame has a zero len, zeros
// followed by anything else are damage.
package frame

import (
	"encoding/binary"
	"hash/crc32"
)

// HeaderSize is the size of a frame's len and crc fields.
const HeaderSize = 8

// MaxLen is the largest len a frame may declare: 1 GiB. A larger len is
// treated as damage, never allocated.
const MaxLen = 1 << 30

// MaxPayload is the longest payload a frame holds: MaxLen less the type
// byte. Writers must refuse a longer one, which readers take for damage.
const MaxPayload = MaxLen - 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Size returns the number of bytes a frame with n payload bytes occupies.
func Size(n int) int { return (HeaderSize + 1 + n + 7) &^ 7 }

// Append appends a frame of type typ with the given payload to dst.
func Append(dst []byte, typ byte, payload []byte) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(1+len(payload)))
	dst = append(dst, 0, 0, 0, 0, typ)
	dst = append(dst, payload...)
	return finish(dst, start)
}

// Begin starts a frame of type typ at the end of dst whose payload the
// caller appends next; Finish completes it. It avoids building the payload
// in a separate buffer.
func Begin(dst []byte, typ byte) (out []byte, start int) {
	start = len(dst)
	return append(dst, 0, 0, 0, 0, 0, 0, 0, 0, typ), start
}

// Finish completes the frame that Begin started at start.
func Finish(dst []byte, start int) []byte {
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start-HeaderSize))
	return finish(dst, start)
}

// finish writes the checksum of the frame at start and pads it.
func finish(dst []byte, start int) []byte {
	crc := crc32.Update(0, castagnoli, dst[start:start+4])
	crc = crc32.Update(crc, castagnoli, dst[start+HeaderSize:])
	binary.LittleEndian.PutUint32(dst[start+4:], crc)
	for len(dst)%8 != start%8 {
		dst = append(dst, 0)
	}
	return dst
}

// check reports whether b (len and crc, then the len bytes they describe)
// holds a valid frame.
func check(hdr []byte, body []byte) bool {
	crc := crc32.Update(0, castagnoli, hdr[:4])
	crc = crc32.Update(crc, castagnoli, body)
	return crc == binary.LittleEndian.Uint32(hdr[4:])
}

// Finder finds the valid frames that follow damage in b, which is how a
// reader tells a torn tail from damage in the middle of a file, and
// checksums ranges of b.
//
// Its cost is linear in len(b), whatever b holds: a candidate frame longer
// than directCheck bytes is checked through a crcIndex of b, built once on
// first need, not by checksumming its body, so damage that looks like long
// frames at every offset cannot make a search quadratic.
type Finder struct {
	b []byte
	x *crcIndex
}

// NewFinder returns a Finder over b, the contents of a file from offset 0.
func NewFinder(b []byte) *Finder { return &Finder{b: b} }

// Next returns the first valid frame at or after offset from, looking only
// at multiples of 8, and whether there is one. Its Err is nil.
func (f *Finder) Next(from int) (Frame, bool) {
	b := f.b
	for off := max(0, (from+7)&^7); off+HeaderSize < len(b); off += 8 {
		n := binary.LittleEndian.Uint32(b[off:])
		if n == 0 || n > MaxLen || int64(n) > int64(len(b)-off-HeaderSize) {
			continue
		}
		body := b[off+HeaderSize : off+HeaderSize+int(n)]
		if n <= directCheck && !check(b[off:off+HeaderSize], body) {
			continue
		}
		if n > directCheck && f.index().frameCRC(off, int(n)) != binary.LittleEndian.Uint32(b[off+4:]) {
			continue
		}
		return Frame{Offset: int64(off), Type: body[0], Payload: body[1:len(body):len(body)]}, true
	}
	return Frame{}, false
}

// CRC returns the CRC-32C of b[s:e], in time logarithmic in e-s once the
// Finder's index is built.
func (f *Finder) CRC(s, e int) uint32 {
	x := f.index()
	return x.crcAt(e) ^ shift(x.crcAt(s), e-s)
}

// index returns the Finder's crcIndex, building it if need be.
func (f *Finder) index() *crcIndex {
	if f.x == nil {
		f.x = newCRCIndex(f.b)
	}
	return f.x
}

// Combine returns the CRC-32C of A‖B, given the CRC-32C of A, that of B,
// and the length of B.
func Combine(crcA, crcB uint32, lenB int) uint32 { return shift(crcA, lenB) ^ crcB }

// directCheck is the longest candidate frame body Finder checksums
// directly: about what a crcIndex lookup costs.
const directCheck = 256
