package snap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/flintkv/flint/internal/vfs"
)

// streamChunk is the most bytes of a stream that one pair holds.
const streamChunk = 64 << 10

// WriteStream is Write for a state that write streams, which is not made
// of pairs: its bytes are the file's pairs, in chunks of at most 64 KiB,
// keyed by their numbers from 0 as 8-byte big-endian integers (see the
// package doc, "Streams"). An error of write fails the snapshot, leaving
// nothing behind.
func WriteStream(fs vfs.FS, dir string, meta Meta, write func(w io.Writer) error) (string, int64, error) {
	var werr error
	pairs := func(yield func(string, []byte) bool) {
		c := &chunker{yield: yield, buf: make([]byte, 0, streamChunk)}
		if werr = write(c); werr == nil {
			werr = c.flush()
		}
		if errors.Is(werr, errStopped) {
			werr = nil // the file's own error stopped it, and Write returns it
		}
	}
	return writeFile(fs, dir, meta, pairs, func() error { return werr })
}

// errStopped is a chunker's error once its file failed, and what the
// reading of a stream gets once its reader is done.
var errStopped = errors.New("snap: the stream stopped")

// chunker cuts a stream into pairs.
type chunker struct {
	yield func(string, []byte) bool
	buf   []byte
	n     uint64 // the next chunk's number
	err   error
}

func (c *chunker) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 && c.err == nil {
		k := min(len(p), streamChunk-len(c.buf))
		c.buf = append(c.buf, p[:k]...)
		p, written = p[k:], written+k
		if len(c.buf) == streamChunk {
			c.err = c.flush()
		}
	}
	return written, c.err
}

// flush yields the bytes buffered, if any, as the next chunk.
func (c *chunker) flush() error {
	if c.err != nil || len(c.buf) == 0 {
		return c.err
	}
	key := binary.BigEndian.AppendUint64(nil, c.n)
	c.n++
	if !c.yield(string(key), c.buf) {
		return errStopped
	}
	c.buf = c.buf[:0]
	return nil
}

// ReadStream reads the stream that WriteStream wrote to the snapshot file
// name and hands it to read, called on the calling goroutine, as one
// reader; it returns the snapshot's meta. Another goroutine reads the
// file, checking it as Verify does, one frame at a time as read consumes
// it: damage fails read's reader (read sees the error, not io.EOF) and
// ReadStream. What read does not consume is read and checked all the
// same. read's error, if any, is the one returned.
func ReadStream(fs vfs.FS, name string, read func(r io.Reader) error) (Meta, error) {
	pr, pw := io.Pipe()
	type result struct {
		meta Meta
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var next uint64
		meta, err := verifyPairs(fs, name, func(key, val []byte) error {
			if len(key) != 8 || binary.BigEndian.Uint64(key) != next {
				return &Error{File: name, Reason: fmt.Sprintf("pair %d is not the stream's chunk %d", next, next)}
			}
			next++
			_, err := pw.Write(val)
			return err
		})
		pw.CloseWithError(err)
		done <- result{meta, err}
	}()
	err := read(pr)
	if err == nil {
		_, err = io.Copy(io.Discard, pr)
	}
	pr.CloseWithError(errStopped)
	r := <-done
	if err != nil && (r.err == nil || !errors.Is(err, r.err)) {
		return r.meta, err
	}
	return r.meta, r.err
}
