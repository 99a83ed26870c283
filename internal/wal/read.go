package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/frame"
	"github.com/flintkv/flint/internal/vfs"
)

// Errors of Entries and Term: the caller asked for entries the log does not
// hold. (Package raftlog gives ErrReleased to raft as raft.ErrCompacted.)
var (
	// ErrReleased is returned for an entry before the log's first: its
	// segment was deleted by ReleaseTo, or before Open.
	ErrReleased = errors.New("wal: entry released: it is before the log's first entry")
	// ErrUnavailable is returned for an entry after the log's last.
	ErrUnavailable = errors.New("wal: entry unavailable: it is after the log's last entry")
)

// FirstIndex returns the index of the first entry that Entries can read, or
// LastIndex()+1 if there is none.
func (w *WAL) FirstIndex() uint64 { return w.firstOf(w.own()) }

// LastIndex returns the index of the last entry of the log (that of the
// snapshot Open was given if the log holds no later one).
func (w *WAL) LastIndex() uint64 { return w.lastOf(w.own()) }

// Term returns the term of entry i, from memory. It returns an error
// wrapping ErrReleased for an entry before FirstIndex, and ErrUnavailable
// for one after LastIndex.
func (w *WAL) Term(i uint64) (uint64, error) { return w.termOf(w.own(), i) }

// Entries returns the entries lo..hi-1 as the log holds them at some
// instant during the call, as raft.Storage.Entries does: the longest
// prefix whose total size (raftpb.Entry.Size) is at most maxSize, but at
// least one entry unless lo == hi. It returns an error wrapping ErrReleased
// if lo is before FirstIndex, and ErrUnavailable if hi is after
// LastIndex()+1 or before lo. It reads the segments, not memory: see the
// package doc. The entries and their data are the caller's.
func (w *WAL) Entries(lo, hi, maxSize uint64) ([]raftpb.Entry, error) {
	return w.entriesOf(w.own(), lo, hi, maxSize)
}

// view is the log of one group that a reader reads: the WAL's own, or one
// group's of a shared log. Its index is guarded by WAL.mu.
type view struct {
	x      *index
	shared bool   // entries are group entries (format version 4) of group
	group  uint64 // the group, if shared
}

// own returns the view of a log that is not shared.
func (w *WAL) own() view { return view{x: &w.idx} }

func (w *WAL) firstOf(v view) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return v.x.first
}

func (w *WAL) lastOf(v view) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return v.x.next - 1
}

func (w *WAL) termOf(v view, i uint64) (uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := checkRange(v.x, i, i+1); err != nil {
		return 0, err
	}
	return v.x.term(i), nil
}

func (w *WAL) entriesOf(v view, lo, hi, maxSize uint64) ([]raftpb.Entry, error) {
	spans, err := w.locate(v, lo, hi)
	if err != nil {
		return nil, err
	}
	var ents []raftpb.Entry
	lim := limit{max: maxSize}
	for _, s := range spans {
		if ents, err = w.readSpan(v, s, ents, &lim); err != nil {
			return nil, err
		}
		if lim.full {
			break
		}
	}
	return ents, nil
}

// locate returns where the entries lo..hi-1 of v lie.
func (w *WAL) locate(v view, lo, hi uint64) ([]span, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := checkRange(v.x, lo, hi); err != nil {
		return nil, err
	}
	return v.x.spans(lo, hi), nil
}

// checkRange returns an error unless x holds the entries lo..hi-1. The
// lock of x must be held.
func checkRange(x *index, lo, hi uint64) error {
	switch {
	case lo < x.first:
		return fmt.Errorf("%w: entry %d (the log starts at %d)", ErrReleased, lo, x.first)
	case hi > x.next || hi < lo:
		return fmt.Errorf("%w: entries %d to %d (the log ends at %d)", ErrUnavailable, lo, hi-1, x.next-1)
	}
	return nil
}

// limit is raft's rule for how many entries a read returns: at least one,
// then as many as keep their total size at most max.
type limit struct {
	max, size uint64
	full      bool // an entry did not fit
}

// fits reports whether e, to follow n entries, fits, and counts it if so.
func (l *limit) fits(e *raftpb.Entry, n int) bool {
	s := uint64(e.Size())
	if n > 0 && l.size+s > l.max {
		l.full = true
		return false
	}
	l.size += s
	return true
}

// left returns how many more bytes fit.
func (l *limit) left() uint64 { return l.max - min(l.size, l.max) }

// readSpan appends to ents the entries of span s that fit lim. It reads
// with a few large reads: each takes the frames of about as many entries as
// lim has room for (all other frames between them included), and a next
// one is made only if they all fit.
func (w *WAL) readSpan(v view, s span, ents []raftpb.Entry, lim *limit) ([]raftpb.Entry, error) {
	f, err := w.fs.Open(path.Join(w.dir, s.name))
	if err != nil {
		return ents, w.openError(v, s, err)
	}
	defer f.Close()
	for i := 0; i < len(s.offs) && !lim.full; {
		j := chunk(s.offs, i, lim.left())
		start, end := int64(s.offs[i])*frameAlign, s.end
		if j < len(s.offs) {
			end = int64(s.offs[j]) * frameAlign
		}
		b, err := readAt(f, start, end)
		if err != nil {
			return ents, fmt.Errorf("wal: reading %s: %w", path.Join(w.dir, s.name), err)
		}
		for ; i < j; i++ {
			off := int64(s.offs[i]) * frameAlign
			e, err := decodeAt(b[off-start:], v, s.base+uint64(i))
			if err != nil {
				return ents, &Error{File: path.Join(w.dir, s.name), Offset: off, Reason: err.Error() + "; the log is damaged: restore the data directory from a backup"}
			}
			if !lim.fits(&e, len(ents)) {
				break
			}
			ents = append(ents, e)
		}
	}
	return ents, nil
}

// chunk returns j such that the next read takes the entries i..j-1 of
// offs: those whose frames start within room bytes of entry i's, and one
// more, which may end past it.
func chunk(offs []uint32, i int, room uint64) int {
	j := i + 1
	for j < len(offs) && uint64(offs[j]-offs[i])*frameAlign <= room {
		j++
	}
	return j
}

// openError is the error of opening span s's segment: ErrReleased if
// ReleaseTo deleted it since the span was located.
func (w *WAL) openError(v view, s span, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		w.mu.Lock()
		released := s.seq <= v.x.released
		w.mu.Unlock()
		if released {
			return fmt.Errorf("%w: entry %d (its segment %s was deleted)", ErrReleased, s.base, s.name)
		}
	}
	return fmt.Errorf("wal: %w", err)
}

// readAt returns the bytes start..end-1 of f, in new memory.
func readAt(f vfs.File, start, end int64) ([]byte, error) {
	b := make([]byte, end-start)
	n, err := f.ReadAt(b, start)
	if n == len(b) {
		return b, nil
	}
	if err == nil || err == io.EOF {
		err = fmt.Errorf("the file ends at %d, before offset %d", start+int64(n), end)
	}
	return nil, err
}

// decodeAt decodes the entry frame at the start of b, which must be entry
// want of v.
func decodeAt(b []byte, v view, want uint64) (raftpb.Entry, error) {
	typ, p, err := frame.NewScanner(b).Next()
	var fe *frame.Error
	wantType := byte(typeEntry)
	if v.shared {
		wantType = typeGroupEntry
	}
	switch {
	case err == io.EOF:
		return raftpb.Entry{}, fmt.Errorf("entry %d is zeros", want)
	case errors.As(err, &fe):
		return raftpb.Entry{}, fmt.Errorf("entry %d: %s", want, fe.Reason)
	case typ != wantType:
		return raftpb.Entry{}, fmt.Errorf("entry %d is a frame of type %d", want, typ)
	}
	var e raftpb.Entry
	if v.shared {
		var g uint64
		if g, e, err = decodeGroupEntry(p); err == nil && g != v.group {
			err = fmt.Errorf("entry %d of group %d holds an entry of group %d", want, v.group, g)
		}
	} else {
		e, err = decodeEntry(p)
	}
	if err == nil && e.Index != want {
		err = fmt.Errorf("entry %d holds entry %d", want, e.Index)
	}
	return e, err
}
