package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync/atomic"
)

// # Watch positions
//
// WATCH is optimistic locking: a transaction (OpExec) names the keys its
// client watched, each with the position at which it watched it (the
// store's WatchPoint then), and is refused if a write changed one of them
// after that position. The check runs when the OpExec is applied, so every
// replica decides the same, from replicated state only.
//
// That state is a table of watchBuckets versions. Every write of a key
// (whatever its op: a SET, even of the same value, a DEL, an APPEND, ...)
// takes the next version and sets the version of the key's bucket, chosen
// by the key's CRC-32C, to it; FLUSHALL sets the flush version. It does so
// under the key's stripe lock, before the write is seen. A batch stamped
// with a log index (see ApplyBatchAt) first raises the version to the index
// in the bits above writeBits, so that its writes count up from there: the
// versions are the same on every replica, whatever it restored from. (A
// batch without a stamp just counts on.) WatchPoint is the last version
// taken: a write seen by then has a version at most that, and any later
// one a greater one. A watched key may have changed after position p if
// the version of its bucket, or the flush version, is above p. Keys that
// share a bucket share a version, so a write to one of them refuses a
// transaction that watched another: a false conflict, as rare as two of a
// few writes between WATCH and EXEC landing in one bucket of 65,536 (and,
// like a conflict, one the client retries). A watched key created and
// deleted again is seen changed, as in Redis; a FLUSHALL refuses every
// transaction that watched before it, whether or not its keys existed
// (Redis refuses only those whose keys existed).
//
// The check and the transaction's writes are atomic: a batch that holds a
// transaction applies alone, whatever other goroutines apply
// (Store.applying). The table is part of the replicated state, saved with
// snapshots (see Watches), so that a member restored from one decides as
// the others do.

// watchBuckets is the number of versions in the table: 512 KiB of them. A
// power of two.
const watchBuckets = 1 << 16

// writeBits is how many low bits of a version count the writes of its log
// entry.
const writeBits = 24

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// versions is the watch table. Its fields are atomic: readers
// (WatchPoint) and tests that apply from several goroutines use it.
type versions struct {
	cur     atomic.Uint64 // the last version taken
	flushed atomic.Uint64 // the version of the last FLUSHALL, 0 if none
	buckets []atomic.Uint64
}

func newVersions() *versions { return &versions{buckets: make([]atomic.Uint64, watchBuckets)} }

// begin starts a batch stamped at (not stamped if at.Index is 0).
func (v *versions) begin(at Stamp) {
	if base := at.Index << writeBits; base > v.cur.Load() {
		v.cur.Store(base)
	}
}

// touch records a write of key; the caller holds the key's stripe lock.
func (v *versions) touch(key []byte) {
	v.buckets[crc32.Checksum(key, castagnoli)&(watchBuckets-1)].Store(v.cur.Add(1))
}

// changedAfter reports whether key may have been written after position p.
func (v *versions) changedAfter(key []byte, p uint64) bool {
	return v.buckets[crc32.Checksum(key, castagnoli)&(watchBuckets-1)].Load() > p || v.flushed.Load() > p
}

// WatchPoint returns the store's position for WATCH: a transaction that
// watched a key at this position is refused if a write after now changes
// the key (see Watch positions). A server reads it once the store reflects
// every write acknowledged before the WATCH (after a read barrier).
func (s *Store) WatchPoint() uint64 { return s.ver.cur.Load() }

// WatchVersion is the version of the watch table encoding that Watches
// writes.
const WatchVersion = 1

// ErrBadWatches means an encoded watch table could not be decoded.
var ErrBadWatches = errors.New("store: malformed watch table")

// The watch table, as Watches encodes it:
//
//	+---------+-----------------+--------------------+-----------------+-------------------------+
//	| version | cur uvarint     | flushed uvarint    | count uvarint   | count x version uvarint |
//	+---------+-----------------+--------------------+-----------------+-------------------------+
//	  1 byte
//
// version is WatchVersion; cur is the last version taken (WatchPoint); flushed the version of the
// last FLUSHALL; count is watchBuckets, followed by each bucket's version
// in bucket order. Uvarints are as in encoding/binary; nothing follows the
// last bucket.

// Watches returns the watch table, encoded as drawn above, in a new slice.
// Call it on the applying goroutine between two batches, with Sessions.
func (s *Store) Watches() []byte {
	v := s.ver
	b := append(make([]byte, 0, 3*watchBuckets), WatchVersion)
	b = binary.AppendUvarint(b, v.cur.Load())
	b = binary.AppendUvarint(b, v.flushed.Load())
	b = binary.AppendUvarint(b, uint64(len(v.buckets)))
	for i := range v.buckets {
		b = binary.AppendUvarint(b, v.buckets[i].Load())
	}
	return b
}

// RestoreWatches replaces the watch table with b, one that Watches
// encoded. A damaged b returns an error wrapping ErrBadWatches and changes
// nothing. Call it between two batches, as RestoreSessions.
func (s *Store) RestoreWatches(b []byte) error {
	if len(b) == 0 || b[0] != WatchVersion {
		return fmt.Errorf("%w: no version %d header", ErrBadWatches, WatchVersion)
	}
	vals, b := make([]uint64, 3+watchBuckets), b[1:]
	for i := range vals {
		x, n := binary.Uvarint(b)
		if n <= 0 {
			return fmt.Errorf("%w: truncated at value %d", ErrBadWatches, i)
		}
		if vals[i], b = x, b[n:]; i == 2 && x != watchBuckets {
			return fmt.Errorf("%w: %d buckets, not %d", ErrBadWatches, x, watchBuckets)
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: %d bytes after the last bucket", ErrBadWatches, len(b))
	}
	v := s.ver
	v.cur.Store(vals[0])
	v.flushed.Store(vals[1])
	for i := range v.buckets {
		v.buckets[i].Store(vals[3+i])
	}
	return nil
}
