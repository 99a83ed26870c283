package snap

import (
	"encoding/binary"
	"fmt"
	"io"
	"path"

	"github.com/flintkv/flint/internal/frame"
	"github.com/flintkv/flint/internal/vfs"
)

// Pairs calls yield for every pair to write, in strictly ascending order of
// their keys (so each key once), until yield returns false.
type Pairs func(yield func(key string, val []byte) bool)

// Write writes a snapshot of meta and pairs into dir and returns its file
// name and size. The snapshot is durable when Write returns, whatever the
// log's fsync policy: Prune deletes older snapshots once newer ones exist,
// so a newer one that a power loss could tear would leave none. On error
// nothing is left behind but perhaps a .tmp file, and, after a crash, a
// snapshot whose rename could not be made durable. Sections that a
// snapshot cannot hold (see Section and MaxSections) fail it before any
// file is made.
func Write(fs vfs.FS, dir string, meta Meta, pairs Pairs) (string, int64, error) {
	return writeFile(fs, dir, meta, pairs, func() error { return nil })
}

// writeFile is Write, which fails, leaving nothing behind, if failed
// returns an error once pairs returned.
func writeFile(fs vfs.FS, dir string, meta Meta, pairs Pairs, failed func() error) (string, int64, error) {
	name := fileName(meta.Index, meta.Term)
	if err := checkSections(meta.Sections); err != nil {
		return "", 0, fmt.Errorf("snap: writing %s: %w", name, err)
	}
	tmp := path.Join(dir, name+".tmp")
	f, err := fs.Create(tmp)
	if err != nil {
		return "", 0, fmt.Errorf("snap: %w", err)
	}
	// Paced: the log's fsyncs, which acknowledge writes, must not wait
	// behind the whole snapshot's.
	w := &writer{f: &vfs.Paced{File: f}, buf: frame.Append(nil, typeHeader, appendHeader(nil, meta))}
	w.sections(meta.Sections)
	size, err := w.write(pairs)
	if err == nil {
		err = failed()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = publish(fs, dir, name)
	}
	if err != nil {
		fs.Remove(tmp)
		return "", 0, fmt.Errorf("snap: writing %s: %w", name, err)
	}
	return name, size, nil
}

// WriteTo writes a snapshot of meta and pairs to w, in the format of a
// snapshot file, and returns how many bytes it wrote: a snapshot that
// LoadBytes reads back, for a caller that keeps or sends it itself.
func WriteTo(w io.Writer, meta Meta, pairs Pairs) (int64, error) {
	if err := checkSections(meta.Sections); err != nil {
		return 0, fmt.Errorf("snap: %w", err)
	}
	sw := &writer{f: streamAt{w}, buf: frame.Append(nil, typeHeader, appendHeader(nil, meta))}
	sw.sections(meta.Sections)
	return sw.write(pairs)
}

// streamAt is an io.WriterAt over an io.Writer, for a writer that writes
// at consecutive offsets from 0, as writer does.
type streamAt struct{ w io.Writer }

func (s streamAt) WriteAt(p []byte, _ int64) (int, error) { return s.w.Write(p) }

// publish renames dir/<name>.tmp, complete and synced, to dir/<name> and
// syncs dir. If that sync fails, it removes <name> unless a file of that
// name was there before (a SAVE with no write since the last, a snapshot
// installed again, which the new file replaces with the same state): List
// and Prune must not count a snapshot whose rename may not be durable.
func publish(fs vfs.FS, dir, name string) error {
	final := path.Join(dir, name)
	existed := exists(fs, final)
	if err := fs.Rename(final+".tmp", final); err != nil {
		return err
	}
	err := fs.SyncDir(dir)
	if err != nil && !existed {
		fs.Remove(final)
	}
	return err
}

// exists reports whether name can be opened.
func exists(fs vfs.FS, name string) bool {
	f, err := fs.Open(name)
	if err == nil {
		f.Close()
	}
	return err == nil
}

// writer streams frames to a file.
type writer struct {
	f     io.WriterAt
	off   int64
	buf   []byte // frames not yet written
	start int    // where the open pairs frame starts in buf, or -1
	err   error
}

// sections appends the frames of ss to the buffer, writing out each one:
// a section frame, then section data frames, of at most chunk bytes of
// data each.
func (w *writer) sections(ss []Section) {
	for _, s := range ss {
		n := min(len(s.Data), chunk)
		var start int
		w.buf, start = frame.Begin(w.buf, typeSection)
		w.buf = frame.Finish(appendSection(w.buf, s, n), start)
		w.flush()
		for data := s.Data[n:]; len(data) > 0 && w.err == nil; data = data[n:] {
			n = min(len(data), chunk)
			w.buf = frame.Append(w.buf, typeSectionData, data[:n])
			w.flush()
		}
	}
}

// write writes every pair and the end frame, and returns the file's size.
func (w *writer) write(pairs Pairs) (int64, error) {
	var count, bytes uint64
	var last string
	w.start = -1
	pairs(func(key string, val []byte) bool {
		if count > 0 && key <= last {
			w.err = fmt.Errorf("pairs out of order: key %.40q after %.40q", key, last)
			return false
		}
		last = key
		w.pair(key, val)
		count++
		bytes += uint64(len(key) + len(val))
		return w.err == nil
	})
	w.closePairs()
	end := binary.AppendUvarint(nil, count)
	end = binary.AppendUvarint(end, bytes)
	w.buf = frame.Append(w.buf, typeEnd, end)
	w.flush()
	return w.off, w.err
}

func (w *writer) pair(key string, val []byte) {
	n := len(key) + len(val) + 2*binary.MaxVarintLen64
	if n > frame.MaxPayload {
		w.err = fmt.Errorf("the pair of key %.40q is %d bytes, more than a snapshot record can hold", key, len(key)+len(val))
		return
	}
	if w.start >= 0 && len(w.buf)-w.start+n > frame.MaxPayload {
		w.closePairs()
		w.flush()
	}
	if w.start < 0 {
		w.buf, w.start = frame.Begin(w.buf, typePairs)
	}
	w.buf = binary.AppendUvarint(w.buf, uint64(len(key)))
	w.buf = append(w.buf, key...)
	w.buf = binary.AppendUvarint(w.buf, uint64(len(val)))
	w.buf = append(w.buf, val...)
	if len(w.buf)-w.start >= chunk {
		w.closePairs()
		w.flush()
	}
}

func (w *writer) closePairs() {
	if w.start >= 0 {
		w.buf = frame.Finish(w.buf, w.start)
		w.start = -1
	}
}

func (w *writer) flush() {
	if w.err != nil || len(w.buf) == 0 {
		return
	}
	_, w.err = w.f.WriteAt(w.buf, w.off)
	w.off += int64(len(w.buf))
	w.buf = w.buf[:0]
}
