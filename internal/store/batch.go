package store

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"
)

// A batch is a sequence of entries that take effect one after another, in
// order. It is what a connection hands to the log in one proposal, and what
// one log record carries.
//
//	+----------------------+-------+----------------------+-------+-----
//	| len uvarint, entry 1 | ...   | len uvarint, entry n |
//	+----------------------+-------+----------------------+-------+-----
//
// Each entry is in AppendEntry's format. Nothing follows the last entry.

// Batch builds a batch. The zero Batch is empty and ready to use.
type Batch struct {
	buf []byte
	n   int
	tmp []byte
}

// Add encodes one command at the end of the batch.
func (b *Batch) Add(op Op, flags byte, args ...[]byte) {
	b.tmp = AppendEntry(b.tmp[:0], op, flags, args...)
	b.buf = binary.AppendUvarint(b.buf, uint64(len(b.tmp)))
	b.buf = append(b.buf, b.tmp...)
	b.n++
}

// AddSize returns how many bytes Add appends for a command with these
// arguments, whatever its op and flags.
func AddSize(args ...[]byte) int {
	n := 3 + uvarintLen(uint64(len(args))) // version, op, flags, nargs
	for _, a := range args {
		n += uvarintLen(uint64(len(a))) + len(a)
	}
	return uvarintLen(uint64(n)) + n
}

// uvarintLen returns the length of x as an unsigned varint.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// Len returns the number of entries in the batch.
func (b *Batch) Len() int { return b.n }

// Bytes returns the encoded batch. It is valid until the next Add or Reset.
func (b *Batch) Bytes() []byte { return b.buf }

// Reset empties the batch, keeping its memory.
func (b *Batch) Reset() {
	b.buf, b.n = b.buf[:0], 0
}

// ApplyBatch applies every entry of an encoded batch in order. Right after
// entry i takes effect, and before the next one does, it calls fn(i, its
// result) if fn is not nil: a caller can serve reads there that must see
// entry i and no later one. The whole batch is decoded before anything is
// applied, so a malformed batch returns an error wrapping ErrBadEntry and
// changes nothing.
//
// It is ApplyBatchAt with no stamp: session ops fail with ErrNoStamp, and
// the session table is left alone.
func (s *Store) ApplyBatch(batch []byte, fn func(i int, res Result)) error {
	return s.ApplyBatchAt(batch, Stamp{}, fn)
}

// ApplyBatchAt is ApplyBatch for a batch of the log entry that at stamps
// (see the package doc on sessions). Before the first entry it advances the
// session clock to at.Time, unless the clock is ahead, and removes up to
// expireStep of the sessions that have expired by it; with no stamp (a
// zero at.Index) it does neither. It advances the store's clock, which
// judges keys' deadlines (see expiry.go), to a non-zero at.Time likewise,
// with or without an index: a store without a log (server.Local) stamps
// its batches with the time alone.
//
// fn is called once for every entry, an OpSeq included: with the OpSeq's
// own result, right after the OpSeq has judged the write it wraps, and
// before that write is applied, answered from the session's kept results,
// or refused. A server does not reply to the OpSeq: its client sent one
// command, the write.
//
// Session ops take effect exactly once, and the session table is the same
// on every replica, only when batches are applied from one goroutine, in
// log order, with the stamps of their entries; the indexes of the stamps
// never decrease.
func (s *Store) ApplyBatchAt(batch []byte, at Stamp, fn func(i int, res Result)) error {
	sc := scratchPool.Get().(*scratch)
	defer sc.release()
	// The first run's prefetch decodes it; what the run leaves is checked
	// before anything is applied. Most batches are one run, decoded once.
	run, rest, err := s.prefetch(batch, 0, &sc.ents, sc.args[:0])
	if err == nil {
		err = checkFrom(rest, len(run), lastOp(run))
	}
	if err != nil {
		return err
	}
	exclusive := holdsExec(batch)
	s.lockApplying(exclusive)
	defer s.unlockApplying(exclusive)
	if at.Time != 0 {
		advanceClock(&s.clock, at.Time)
	}
	if at.Index != 0 {
		s.advanceSessions(at.Time)
	}
	s.ver.begin(at)
	var w wrap
	for i := 0; ; { // a prefetched run of entries at a time
		for _, e := range run {
			res := s.applyAt(e, at, &w)
			if fn != nil {
				fn(i, res)
			}
			i++
		}
		if len(rest) == 0 {
			return nil
		}
		run, rest, _ = s.prefetch(rest, i, &sc.ents, sc.args[:0]) // checked above
	}
}

// applyAt applies e, an entry of a batch stamped at. w holds what the
// OpSeq before e, if e follows one, decided about it; applying an OpSeq
// sets it.
func (s *Store) applyAt(e entry, at Stamp, w *wrap) Result {
	switch {
	case w.on:
		return s.applyWrapped(e, at, w)
	case e.op.session():
		return s.applySession(e, at, w)
	case e.op == OpExec:
		return s.exec(e, at)
	}
	return s.apply(e)
}

// lockApplying locks s.applying, for writing if exclusive, else for
// reading. (It returns no unlocking function: a method value allocates.)
func (s *Store) lockApplying(exclusive bool) {
	if exclusive {
		s.applying.Lock()
	} else {
		s.applying.RLock()
	}
}

// unlockApplying undoes lockApplying(exclusive).
func (s *Store) unlockApplying(exclusive bool) {
	if exclusive {
		s.applying.Unlock()
	} else {
		s.applying.RUnlock()
	}
}

// holdsExec reports whether a batch that CheckBatch accepts holds an
// OpExec. It reads only the entries' lengths and ops.
func holdsExec(batch []byte) bool {
	for len(batch) > 0 {
		l, w := binary.Uvarint(batch)
		if Op(batch[w+1]) == OpExec {
			return true
		}
		batch = batch[w+int(l):]
	}
	return false
}

// scratch is where ApplyBatch decodes entries. The entries point into the
// args, so a scratch on ApplyBatch's stack would be moved to the heap, 3
// KiB for every batch: a pool reuses them instead.
type scratch struct {
	ents [PrefetchKeys]entry
	args [2 * PrefetchKeys][]byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// release returns sc to the pool, holding no memory of the batch it decoded.
func (sc *scratch) release() {
	clear(sc.ents[:])
	clear(sc.args[:])
	scratchPool.Put(sc)
}

// CheckBatch decodes every entry of batch, and returns an error wrapping
// ErrBadEntry if one does not decode, an OpSeq is not followed by an entry
// it can wrap, or the batch does not end where its last entry does.
// ApplyBatch applies exactly the batches it accepts.
func CheckBatch(batch []byte) error { return checkFrom(batch, 0, 0) }

// checkFrom is CheckBatch of a batch's entries from its entry number i,
// which follow one with op prev (0 for none).
func checkFrom(batch []byte, i int, prev Op) error {
	var scratch [8][]byte
	ws := wrapCheck{prev}
	for ; len(batch) > 0; i++ {
		var e entry
		var err error
		if e, batch, err = nextEntry(batch, i, scratch[:0]); err != nil {
			return err
		}
		if err := ws.next(e.op, i); err != nil {
			return err
		}
	}
	return ws.end()
}

// wrapCheck checks, entry after entry, that every OpSeq of a sequence is
// followed by an entry it can wrap. prev is the op of the last entry seen
// (0 for none).
type wrapCheck struct{ prev Op }

// next checks entry i, whose op is op.
func (w *wrapCheck) next(op Op, i int) error {
	err := checkWrap(w.prev, op, i)
	w.prev = op
	return err
}

// end checks that the sequence does not end with an OpSeq.
func (w *wrapCheck) end() error {
	if w.prev == OpSeq {
		return errSeqAtEnd
	}
	return nil
}

var errSeqAtEnd = fmt.Errorf("%w: an OpSeq ends the batch, but must be followed by the write it wraps", ErrBadEntry)

// checkWrap returns an error wrapping ErrBadEntry if an entry with op,
// entry number i of its batch, may not follow one with op prev: what
// follows an OpSeq must be an entry it can wrap, a write on keys or an
// OpExec.
func checkWrap(prev, op Op, i int) error {
	if prev == OpSeq && (op.session() || op.slotOp() || op == OpRead) {
		return fmt.Errorf("%w: entry %d of batch follows an OpSeq, which can wrap only a write on keys or an OpExec", ErrBadEntry, i)
	}
	return nil
}

// lastOp returns the op of the last of ents, or 0 if there is none.
func lastOp(ents []entry) Op {
	if len(ents) == 0 {
		return 0
	}
	return ents[len(ents)-1].op
}

// nextEntry decodes the first entry of batch, entry number i of its batch,
// with args as decodeEntry's scratch, and returns it and the rest of batch,
// or an error wrapping ErrBadEntry.
func nextEntry(batch []byte, i int, args [][]byte) (entry, []byte, error) {
	l, w := binary.Uvarint(batch)
	if w <= 0 || l > uint64(len(batch)-w) {
		return entry{}, nil, fmt.Errorf("%w: entry %d of batch overruns it", ErrBadEntry, i)
	}
	e, err := decodeEntry(batch[w:w+int(l)], args)
	if err != nil {
		return entry{}, nil, fmt.Errorf("entry %d of batch: %w", i, err)
	}
	return e, batch[w+int(l):], nil
}
