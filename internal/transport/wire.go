package transport

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
)

// headerSize is the size of a frame's header: len, crc, type and group.
const headerSize = 17

// The frame types (see the package doc).
const (
	typeHello     byte = 1
	typeChallenge byte = 2
	typeProof     byte = 3
	typeStatus    byte = 4
	typeMessages  byte = 16
	typeSnapBegin byte = 17
	typeSnapChunk byte = 18
	typeSnapEnd   byte = 19
)

// maxHandshakeFrame bounds the payload of every frame read before the peer
// has authenticated: handshake payloads are under 100 bytes.
const maxHandshakeFrame = 4 << 10

// keepReadBuffer is the largest read buffer a frameReader keeps between
// frames: a larger one, grown for one large frame, is dropped.
const keepReadBuffer = 4 << 20

// firstRead is how much a frameReader reads at first of a payload longer
// than its buffer; it reads twice as much each time after that.
const firstRead = 64 << 10

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// beginFrame starts a frame of type typ for group at the end of dst, whose
// payload the caller appends next; finishFrame completes it.
func beginFrame(dst []byte, typ byte, group uint64) (out []byte, start int) {
	start = len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, typ)
	return binary.LittleEndian.AppendUint64(dst, group), start
}

// finishFrame writes the len and crc of the frame that beginFrame started at
// start, whose payload ends at the end of dst.
func finishFrame(dst []byte, start int) []byte {
	f := dst[start:]
	binary.LittleEndian.PutUint32(f, uint32(len(f)-headerSize))
	binary.LittleEndian.PutUint32(f[4:], frameCRC(f[:headerSize], f[headerSize:]))
	return dst
}

// appendFrame appends a whole frame to dst.
func appendFrame(dst []byte, typ byte, group uint64, payload []byte) []byte {
	dst, start := beginFrame(dst, typ, group)
	return finishFrame(append(dst, payload...), start)
}

// frameCRC is the CRC-32C of a frame's len, type, group and payload: all
// of the frame but the crc itself.
func frameCRC(hdr, payload []byte) uint32 {
	crc := crc32.Update(0, castagnoli, hdr[:4])
	crc = crc32.Update(crc, castagnoli, hdr[8:headerSize])
	return crc32.Update(crc, castagnoli, payload)
}

// frame is one frame as frameReader.next returns it.
type frame struct {
	typ     byte
	group   uint64
	payload []byte // aliases the reader's buffer until its next call
}

// frameReader reads frames from a stream, refusing any whose payload is
// longer than max before reading it. Its memory grows with the bytes that
// actually arrive, never with what a header claims.
type frameReader struct {
	r   io.Reader
	max int
	hdr [headerSize]byte
	buf []byte
}

// next reads and checks the next frame. It returns io.EOF at a clean end
// between frames, io.ErrUnexpectedEOF inside one, an error wrapping
// ErrFrameTooLarge or ErrCorrupt for a bad frame, or the stream's error.
// After an error the stream's position is unknown: the caller drops it.
func (fr *frameReader) next() (frame, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return frame{}, err
	}
	n := binary.LittleEndian.Uint32(fr.hdr[:])
	if int64(n) > int64(fr.max) {
		return frame{}, fmt.Errorf("%w: %d bytes, the limit is %d", ErrFrameTooLarge, n, fr.max)
	}
	payload, err := fr.read(int(n))
	if err != nil {
		return frame{}, noEOF(err)
	}
	if frameCRC(fr.hdr[:], payload) != binary.LittleEndian.Uint32(fr.hdr[4:]) {
		return frame{}, fmt.Errorf("%w: frame of type %d, %d bytes", ErrCorrupt, fr.hdr[8], n)
	}
	return frame{typ: fr.hdr[8], group: binary.LittleEndian.Uint64(fr.hdr[9:]), payload: payload}, nil
}

// read reads the n bytes of a payload into the reader's buffer, growing it
// by doubling as bytes arrive.
func (fr *frameReader) read(n int) ([]byte, error) {
	if cap(fr.buf) > keepReadBuffer {
		fr.buf = nil
	}
	for have := 0; have < n; {
		if have == cap(fr.buf) {
			grown := make([]byte, min(n, max(firstRead, 2*have)))
			copy(grown, fr.buf)
			fr.buf = grown
		}
		fr.buf = fr.buf[:min(n, cap(fr.buf))]
		if _, err := io.ReadFull(fr.r, fr.buf[have:]); err != nil {
			return nil, err
		}
		have = len(fr.buf)
	}
	return fr.buf[:n], nil
}

// noEOF turns io.EOF, which inside a frame means a cut stream, into
// io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
