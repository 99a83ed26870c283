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
// sets the version of the key's bucket, chosen by the key's CRC-32C, to the
// version of the batch that writes it; FLUSHALL sets the flush version.
// A batch's version is, for a batch stamped with a log index (see
// ApplyBatchAt), the index in the bits above batchBits and, below them,
// how many batches of the same log entry came before it; for a batch
// applied without a stamp, one more than the last one's. So versions grow
// with every batch, and are the same on every replica. WatchPoint is the
// version of the last batch applied whole: every write applied by then has
// a version at most that, every later write a greater one. A watched key
// was changed after position p if the version of its bucket, or the flush
// version, is above p. Keys that share a bucket share a version, so a write
// to one of them refuses a transaction that watched another: a false
// conflict, as rare as two of a few writes between WATCH and EXEC landing in
// one bucket of 65,536 (and, like a conflict, one the client retries). A
// watched key created and deleted again is seen changed, as in Redis; a
// FLUSHALL refuses every transaction that watched before it, whether or not
// its keys existed (Redis refuses only those whose keys existed).
//
// The table is part of the replicated state, saved with snapshots (see
// Watches), so that a member restored from one decides as the others do.

// watchBuckets is the number of versions in the table: 512 KiB of them. A
// power of two.
const watchBuckets = 1 << 16

// batchBits is how many low bits of a stamped batch's version count the
// batches of its log entry before it.
const batchBits = 24

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// versions is the watch table. Its fields are atomic because readers
// (WatchPoint) and tests that apply from several goroutines use it; only
// the applying goroutine writes it in a replica.
type versions struct {
	cur     atomic.Uint64 // the version of the batch being applied
	last    atomic.Uint64 // the version of the last batch applied whole
	index   uint64        // the log index of the last stamped batch (applying goroutine only)
	flushed atomic.Uint64 // the version of the last FLUSHALL, 0 if none
	buckets []atomic.Uint64
}

func newVersions() *versions { return &versions{buckets: make([]atomic.Uint64, watchBuckets)} }

// begin starts a batch stamped at (not stamped if at.Index is 0).
func (v *versions) begin(at Stamp) {
	switch {
	case at.Index == 0:
		v.cur.Store(v.last.Load() + 1)
	case at.Index == v.index:
		v.cur.Store(min(v.cur.Load()+1, at.Index<<batchBits|(1<<batchBits-1)))
	default:
		v.index = at.Index
		v.cur.Store(at.Index << batchBits)
	}
}

// end ends the batch begun last: it has been applied whole.
func (v *versions) end() { v.last.Store(v.cur.Load()) }

// touch records a write of key by the batch being applied.
func (v *versions) touch(key []byte) {
	v.buckets[crc32.Checksum(key, castagnoli)&(watchBuckets-1)].Store(v.cur.Load())
}

// changedAfter reports whether key may have been written after position p.
func (v *versions) changedAfter(key []byte, p uint64) bool {
	return v.buckets[crc32.Checksum(key, castagnoli)&(watchBuckets-1)].Load() > p || v.flushed.Load() > p
}

// WatchPoint returns the store's position for WATCH: a transaction that
// watched a key at this position is refused if a write applied after now
// changes the key (see Watch positions). A server reads it once the store
// reflects every write acknowledged before the WATCH (after a read barrier).
func (s *Store) WatchPoint() uint64 { return s.ver.last.Load() }

// WatchVersion is the version of the watch table encoding that Watches
// writes.
const WatchVersion = 1

// ErrBadWatches means an encoded watch table could not be decoded.
var ErrBadWatches = errors.New("store: malformed watch table")

// The watch table, as Watches encodes it:
//
//	+---------+-----------------+--------------------+-----------------+-------------------------+
//	| version | last uvarint    | flushed uvarint    | count uvarint   | count x version uvarint |
//	+---------+-----------------+--------------------+-----------------+-------------------------+
//	  1 byte
//
// version is WatchVersion; last is WatchPoint; flushed the version of the
// last FLUSHALL; count is watchBuckets, followed by each bucket's version
// in bucket order. Uvarints are as in encoding/binary; nothing follows the
// last bucket.

// Watches returns the watch table, encoded as drawn above, in a new slice.
// Call it on the applying goroutine between two batches, with Sessions.
func (s *Store) Watches() []byte {
	v := s.ver
	b := append(make([]byte, 0, 3*watchBuckets), WatchVersion)
	b = binary.AppendUvarint(b, v.last.Load())
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
	v.last.Store(vals[0])
	v.cur.Store(vals[0])
	v.flushed.Store(vals[1])
	for i := range v.buckets {
		v.buckets[i].Store(vals[3+i])
	}
	return nil
}
