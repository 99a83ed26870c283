package transport

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"
)

// snapshotBody is the body a ReceiveSnapshot reads: the payloads of the
// stream's chunk frames, each checked (CRC-32C) as it is read, up to the
// end marker, whose total must count them.
type snapshotBody struct {
	r     *frameReader
	conn  net.Conn // each frame must arrive within stallTimeout on it; nil for none
	group uint64
	rest  []byte // what the reader has not taken of the current chunk
	total uint64 // the bytes of the chunks read so far
	// err is io.EOF once the end marker checked, or why the stream failed;
	// once set, it is every later Read's error.
	err error
}

// Read implements io.Reader.
func (b *snapshotBody) Read(p []byte) (int, error) {
	for len(b.rest) == 0 && b.err == nil {
		b.next()
	}
	if len(b.rest) == 0 {
		return 0, b.err
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

// next reads the stream's next frame: a chunk, or the end marker.
func (b *snapshotBody) next() {
	if b.conn != nil {
		b.conn.SetReadDeadline(time.Now().Add(stallTimeout))
	}
	f, err := b.r.next()
	switch {
	case err != nil:
		b.err = fmt.Errorf("transport: snapshot stream: %w", noEOF(err))
	case f.group != b.group:
		b.err = fmt.Errorf("%w: a frame of group %d in a snapshot of group %d", ErrMalformed, f.group, b.group)
	case f.typ == typeSnapChunk:
		b.rest = f.payload
		b.total += uint64(len(f.payload))
	case f.typ == typeSnapEnd && len(f.payload) == 8:
		b.err = io.EOF
		if total := binary.LittleEndian.Uint64(f.payload); total != b.total {
			b.err = fmt.Errorf("%w: the snapshot's end marker counts %d bytes, its chunks held %d", ErrCorrupt, total, b.total)
		}
	default:
		b.err = fmt.Errorf("%w: frame of type %d (%d bytes) in a snapshot stream", ErrMalformed, f.typ, len(f.payload))
	}
}
