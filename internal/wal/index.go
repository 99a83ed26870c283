package wal

import "sort"

// index locates the log's entries in its segments, so that Entries and
// Term can serve them while the log is open. Open's replay builds it as it
// reads each entry, and Append keeps it, under WAL.mu, as it writes them;
// it lives in memory only.
//
// It costs 4 bytes per entry (an offset in run.offs; up to 8 while the
// slice grows), 16 bytes per change of term (termRun) and a run, about 64
// bytes, per segment.
type index struct {
	// Invariant: the log's entries are first..next-1, and each is in
	// exactly one run: runs are in segment order, none is empty, and each
	// starts where the one before it ends (runs[0].base is first). With
	// no run, first == next.
	first, next uint64
	runs        []run
	// Invariant: terms[k] gives the term of the entries from terms[k].index
	// to terms[k+1].index-1 (or to next-1); indexes increase, and
	// terms[0].index <= first. Empty if runs is.
	terms []termRun
	// released is the sequence number of the newest segment that ReleaseTo
	// let go of: a reader that finds it, or an older one, gone from the
	// directory was beaten by ReleaseTo, and reads ErrReleased.
	released uint64
}

// run is the entries of the log that one segment holds, in index order.
type run struct {
	seq  uint64
	name string
	base uint64 // the index of the entry at offs[0]
	// Invariant: offs[i] is the offset of entry base+i's frame in the
	// segment, in units of frameAlign, and offsets increase. An element
	// below len(offs) is never written again (a truncation cuts the
	// capacity too, so the next append copies), so that readers may keep
	// a subslice after they let go of the lock.
	offs []uint32
	// end is an offset at or after the end of the last entry's frame, no
	// later than the end of the segment's frames.
	end int64
}

// termRun is the term of consecutive entries from index on.
type termRun struct{ index, term uint64 }

// frameAlign is the alignment of frames in a segment (see package frame),
// the unit of run.offs.
const frameAlign = 8

// maxIndexed is the end of the segment bytes that run.offs can locate:
// a segment never grows past it (see WAL.Append).
const maxIndexed = (1 << 32) * frameAlign

// reset forgets every entry: the log is empty, and its next entry is next.
func (x *index) reset(next uint64) {
	x.first, x.next = next, next
	x.runs, x.terms = nil, nil
}

// add records entry i, of term, whose frame is at off in segment seq and
// ends by end. As in the log, an entry at or before the last replaces it
// and every entry after it. One after next leaves a gap that only entries
// covered by a snapshot may be in (see Open): the index forgets them.
func (x *index) add(seq uint64, name string, i, term uint64, off, end int64) {
	switch {
	case i < x.next:
		x.truncate(i)
	case i > x.next:
		x.reset(i)
	}
	if n := len(x.runs); n == 0 || x.runs[n-1].seq != seq {
		x.runs = append(x.runs, run{seq: seq, name: name, base: i})
	}
	r := &x.runs[len(x.runs)-1]
	r.offs = append(r.offs, uint32(off/frameAlign))
	r.end = end
	if n := len(x.terms); n == 0 || x.terms[n-1].term != term {
		x.terms = append(x.terms, termRun{index: i, term: term})
	}
	x.next = i + 1
}

// truncate forgets the entries from i on, which must be before next.
func (x *index) truncate(i uint64) {
	if i <= x.first {
		x.reset(i)
		return
	}
	k := x.find(i)
	r := &x.runs[k]
	if n := i - r.base; n == 0 {
		x.runs = x.runs[:k]
	} else {
		r.end = int64(r.offs[n]) * frameAlign // where the first entry cut starts
		r.offs = r.offs[:n:n]
		x.runs = x.runs[:k+1]
	}
	t := sort.Search(len(x.terms), func(t int) bool { return x.terms[t].index >= i })
	x.terms = x.terms[:t]
	x.next = i
}

// release forgets the entries in segment seq and those before it.
func (x *index) release(seq uint64) {
	x.released = seq
	k := sort.Search(len(x.runs), func(k int) bool { return x.runs[k].seq > seq })
	x.runs = x.runs[k:]
	if len(x.runs) == 0 {
		x.reset(x.next)
		return
	}
	x.first = x.runs[0].base
	t := sort.Search(len(x.terms), func(t int) bool { return x.terms[t].index > x.first })
	x.terms = x.terms[t-1:]
}

// find returns the position in runs of the run that holds entry i, which
// must be one of first..next-1.
func (x *index) find(i uint64) int {
	return sort.Search(len(x.runs), func(k int) bool { return x.runs[k].base > i }) - 1
}

// term returns the term of entry i, which must be one of first..next-1.
func (x *index) term(i uint64) uint64 {
	t := sort.Search(len(x.terms), func(t int) bool { return x.terms[t].index > i })
	return x.terms[t-1].term
}

// span is where entries lie in one segment, as a reader takes them from
// the index: its offs are a run's, which never change.
type span struct {
	seq  uint64
	name string
	base uint64   // the index of the entry at offs[0]
	offs []uint32 // see run.offs
	end  int64    // an offset at or after the end of the last entry's frame
}

// spans returns where the entries lo..hi-1 lie, which must be in
// first..next-1 (none if lo == hi).
func (x *index) spans(lo, hi uint64) []span {
	var spans []span
	for k := x.find(lo); lo < hi; k++ {
		r := &x.runs[k]
		a, b := lo-r.base, min(hi-r.base, uint64(len(r.offs)))
		s := span{seq: r.seq, name: r.name, base: lo, offs: r.offs[a:b:b], end: r.end}
		if b < uint64(len(r.offs)) {
			s.end = int64(r.offs[b]) * frameAlign
		}
		spans = append(spans, s)
		lo = r.base + b
	}
	return spans
}
