package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// DeadlinesVersion is the version of the deadlines encoding that
// Deadlines writes.
const DeadlinesVersion = 1

// ErrBadDeadlines means encoded deadlines could not be decoded: they are
// damaged, from an unknown version, or name a key the store does not hold.
var ErrBadDeadlines = errors.New("store: malformed deadlines")

// The keys' deadlines, as Deadlines encodes them:
//
//	+---------+-------+---------------+-------------------------------------------+
//	| version | clock | count uvarint | count x (len uvarint, key, deadline)      |
//	+---------+-------+---------------+-------------------------------------------+
//	  1 byte    8 B                                                 8 B
//
// version is DeadlinesVersion; clock is the store's clock (Unix
// nanoseconds) and deadline a key's deadline (Unix milliseconds), both
// big-endian int64s. The keys come in no particular order, each once.
// Nothing follows the last one.

// Deadlines returns the deadlines of the store's keys and its clock,
// encoded as drawn above, in a new slice. To be consistent with a
// Snapshot, call both on the apply thread between two batches; a key
// that has expired but is not removed yet is in both.
func (s *Store) Deadlines() []byte {
	var body []byte
	n := 0
	for i := range s.stripes {
		st := &s.stripes[i]
		st.mu.RLock()
		for k, at := range st.mu.dl.at {
			body = binary.AppendUvarint(body, uint64(len(k)))
			body = append(body, k...)
			body = binary.BigEndian.AppendUint64(body, uint64(at))
		}
		n += len(st.mu.dl.at)
		st.mu.RUnlock()
	}
	b := []byte{DeadlinesVersion}
	b = binary.BigEndian.AppendUint64(b, uint64(s.clock.Load()))
	b = binary.AppendUvarint(b, uint64(n))
	return append(b, body...)
}

// RestoreDeadlines gives the store's keys the deadlines that b, which
// Deadlines encoded, holds, and advances the clock to b's. Call it once the
// keys are loaded (Put), before any batch is applied. Damaged deadlines,
// or one for a key the store does not hold, return an error wrapping
// ErrBadDeadlines; the deadlines before it are set.
func (s *Store) RestoreDeadlines(b []byte) error {
	if len(b) < 9 || b[0] != DeadlinesVersion {
		return fmt.Errorf("%w: bad header", ErrBadDeadlines)
	}
	clock := int64(binary.BigEndian.Uint64(b[1:]))
	b = b[9:]
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)) {
		return fmt.Errorf("%w: bad count", ErrBadDeadlines)
	}
	b = b[w:]
	for i := uint64(0); i < n; i++ {
		l, w := binary.Uvarint(b)
		if w <= 0 || l > math.MaxInt32 || uint64(len(b)-w) < l+8 {
			return fmt.Errorf("%w: deadline %d overruns the data", ErrBadDeadlines, i)
		}
		key := b[w : w+int(l)]
		at := int64(binary.BigEndian.Uint64(b[w+int(l):]))
		b = b[w+int(l)+8:]
		if !s.restoreDeadline(key, at) {
			return fmt.Errorf("%w: a deadline for key %.80q, which the store does not hold", ErrBadDeadlines, key)
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrBadDeadlines, len(b))
	}
	advanceClock(&s.clock, clock)
	return nil
}

// restoreDeadline gives key the deadline at, and reports whether the
// store holds key.
func (s *Store) restoreDeadline(key []byte, at int64) bool {
	st, h := s.locate(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.lookupLocked(h, key) == nil {
		return false
	}
	st.setDeadlineLocked(key, at)
	return true
}
