// Package store is Flint's state machine: an in-memory map from binary keys
// to binary values with an ordered index for range reads.
//
// It changes only by applying entries (see AppendEntry for their format), the
// same bytes the raft log carries, and answers reads directly. It has no
// network, disk, clock or goroutines of its own, and the outcome of applying a
// sequence of entries depends on nothing else.
//
// The map is split into lock stripes, each with its own lock, so that
// commands on different keys run on different cores without contending. (They
// are not called shards: in Flint a shard is a raft group and the hash slots it
// owns.) A command that touches several keys locks their stripes in ascending
// order and is atomic as a whole. Each stripe keeps a hash table for point
// reads (see table) and, for ordered reads, an index that a write appends to
// rather than searches (see index).
// The index's sorted runs never change once made, so taking them under the
// locks gives a consistent view that range reads and snapshots iterate
// without holding any lock, and neither stalls writes for longer than
// taking the views does.
//
// # Client sessions
//
// The store also holds the client sessions that make a retried write take
// effect once (the Raft dissertation, section 6.3). They live in the
// replicated state: they change only by applying entries, and they are
// saved with snapshots (see Sessions). A client opens a session with an
// OpSessionOpen entry, whose result's Int is its client id, and numbers its
// writes (seq) in increasing order. It sends each write after an OpSeq
// entry in the same batch, which carries the client id, the write's seq,
// and the lowest seq whose reply the client has not received yet (lowest
// unacknowledged). The OpSeq first raises the session's floor to lowest
// unacknowledged, dropping the results kept below it, then judges the
// write that follows it, which it wraps (a write on keys, or an OpExec: a
// whole transaction is one write of its session, and its kept result holds
// its entries' results, Sub, so that a retried transaction gets the reply
// of its one application, its reads' included):
//
//   - the session is unknown, or has expired: the write is not applied, and
//     the results of both entries carry ErrSessionExpired;
//   - seq is below the floor (acknowledged, or its result dropped): not
//     applied, ErrStaleSequence in both;
//   - the write of this seq was applied and its result is kept: not applied,
//     and its result is the kept one;
//   - otherwise the write is applied and a copy of its result kept under seq.
//
// The OpSeq's own result carries the same error when it refuses the write,
// and is a plain Done otherwise; a server does not reply to it, as its
// client sent one command. A batch applied without a stamp has its session
// ops fail with ErrNoStamp. Sessions have no clock of their own: the
// session clock is the largest time that the stamps of the applied batches
// carry (see ApplyBatchAt), so it never goes back, and every replica
// expires the same sessions at the same entry. Every session op sets the
// session's last-active time to the clock; a session idle longer than
// Options.SessionTTL has expired. The bounds of Options keep the table's
// memory bounded whatever clients do: past them the least recently active
// sessions are evicted, and a session's results of the lowest seqs dropped
// (its floor then passes them), so that a retry gets an error but never
// applies a write twice.
//
// # Transactions
//
// An OpExec entry is a transaction: the entries of its commands, applied
// as one and isolated from readers, unless a key its client watched was
// written since (see tx.go). The watch table that decides that is
// replicated state too, saved with snapshots (see watch.go).
//
// # Expiring keys
//
// A key may have a deadline, judged by the same clock (see expiry.go): a
// key whose deadline the clock has passed is gone to every read and write,
// removed or not. So every op that reads a key looks it up through
// visibleLocked, and every op that writes one through liveLocked, which
// removes an expired key by the ordinary delete path first; an op that
// sets a value decides what becomes of the deadline, as Redis's command
// does (SET clears it, APPEND keeps it).
package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Errors returned in Result.Err. They are the client's fault, not the store's.
var (
	ErrNotInteger = errors.New("store: value is not an integer or out of range")
	ErrOverflow   = errors.New("store: increment or decrement would overflow")
	ErrTooLarge   = errors.New("store: string exceeds maximum allowed size")
)

// Options configure a Store.
type Options struct {
	Stripes  int // number of stripes, rounded up to a power of two; default DefaultStripes()
	MaxValue int // longest value APPEND may build, in bytes; default 64 MiB

	// The bounds of the session table (see the package doc). Every replica
	// of a group must use the same: the table must be the same on all.
	SessionTTL        time.Duration // a session idle longer than this, by the session clock, expires; default 10 minutes
	MaxSessions       int           // most sessions; opening one more first evicts the least recently active; default 100,000
	MaxSessionResults int           // most results a session keeps; past it the lowest seq's is dropped; default 1,024
	MaxSessionBytes   int           // most bytes of values a session's kept results hold (a transaction's sub-results count too), dropped as above; default 1 MiB
	// MaxSessionMemory bounds the memory of the whole table, values and an
	// estimate of the overheads; past it the least recently active
	// sessions are evicted. Default 256 MiB, and at least what one session
	// may hold.
	MaxSessionMemory int64
	// Group is the id of the group the store is in (0 for a store that
	// is not sharded), at most 65535: it is in the client ids the store
	// issues, which makes them unique in the cluster (see OpSessionOpen).
	Group uint64

	fresh    int // items an index gathers before sorting them; default defaultFresh (tests set less)
	hashBits int // tests only: keep this many low bits of each hash (0: all), so that keys clash; at most 9 (see table)

	scanSegments int // tests only: the most table segments a Scan looks at; default scanSegments
}

// Store is the state machine. All methods are safe for concurrent use.
type Store struct {
	seed     maphash.Seed
	hashMask uint64 // see Options.hashBits
	mask     uint64
	maxValue int
	stripes  []stripe
	every    lockSet   // every stripe, in order
	retain   bool      // see Retain
	fresh    int       // see Options.fresh
	ver      *versions // the watch table: see Watch positions
	alarm    *alarm    // wakes the expirer: see alarm.go
	// applying is read-locked while an entry or a batch applies, and
	// write-locked while one with a transaction does: so that a
	// transaction's WATCH check and its writes are atomic, whatever
	// goroutines apply (see Watch positions).
	applying sync.RWMutex
	// txDone is closed once the transaction under way, if any, clears the
	// stripes it marked busy (see Transactions).
	txDone atomic.Pointer[chan struct{}]

	scanSegments int // see Options.scanSegments
	// clock is the largest time of the stamps of the applied batches, in
	// Unix nanoseconds: the time that deadlines are judged by (see
	// expiry.go). It only grows.
	clock   atomic.Int64
	dueFrom atomic.Uint32 // the stripe that AppendDue starts from
	// sessions is the client-session table (see the package doc). Only
	// stamped batches lock it: once, and once more for every session op
	// (twice for an OpSeq whose write is applied).
	sessions struct {
		sync.Mutex
		t sessionTable
	}
	moves moves // slot-move records: see slotmove.go
}

// stripe owns the keys that hash to it.
type stripe struct {
	mu struct {
		sync.RWMutex
		// Invariant: each key's cell is in exactly one of m, under the
		// key's hash, and clash, under the key. A key is in clash only if,
		// when it was added, m held another key under its hash; it stays
		// there after that key goes, and m may then hold no key or a third
		// one under that hash, so a lookup that m does not answer asks
		// clash. The newest item of each key in idx points to its cell; the
		// newest item of a key in neither is absent, or there is none. Bytes
		// within len of a stored value are never modified: readers and
		// snapshots share them. (A table keyed by the hash, which the
		// stripe's choice computed already, has slots of 16 bytes with one
		// pointer, not 24 with two as a string key's, and does not hash keys
		// again; clash is nil until two keys' 64-bit hashes are equal.)
		m     table
		clash map[string]*cell
		idx   index
		// gen counts the views taken of idx (see cell). It grows by one
		// with each.
		gen uint64
		// garbage estimates the memory idx keeps only for shadowed and
		// absent items, and their cells and values, in bytes: see shadowLocked.
		garbage int64
		// busy is set while a transaction applies to the stripe's keys:
		// readers wait until it is clear (see Transactions).
		busy bool
		dl   deadlines // the keys' deadlines: see expiry.go
	}
	ver   *versions    // the store's watch table: every write of a key touches it
	alarm *alarm       // the store's: every deadline set tells it
	keys  atomic.Int64 // number of keys, written under mu
	bytes atomic.Int64 // sum of key and value lengths, written under mu
	_     [64]byte     // keep neighbouring stripes' locks off one cache line
}

// cell holds one key's value; the stripe's table and the key's item in the
// index both point to it. So a write to a key changes only its cell, and
// leaves the table and the index alone, unless a view of the index may share
// the cell.
//
// Invariant: a cell with gen equal to its stripe's gen was made after the
// index's last view, so no view holds it, and a write may change its val in
// place, under the stripe's lock; deleting its key marks it dead (gen
// deadGen). A cell with an older gen may be in a view, which reads it
// without any lock: it never changes again, and a write to its key makes a
// new cell and puts it in the table and the index, or a tombstone in the index.
type cell struct {
	key   string // the stored key: in short, or a string of its own (see newCell)
	val   []byte
	gen   uint64
	short [shortKey]byte // holds key when it fits: see newCell
}

// shortKey is the longest key a cell holds itself. It fills the cell to 64
// bytes, one size class and one cache line.
const shortKey = 16

// newCell returns a cell for key and val made at generation gen.
//
// A key of up to shortKey bytes is copied into the cell, and c.key points
// there: so a lookup that compares keys (lookupLocked's, the index's) reads the
// cell's line, which the write or read then needs anyway, rather than a
// separate allocation, and the collector has one object less to mark per
// key. A longer key is stored as a string of its own, shared with key when
// key is a string already. A short key is never shared between cells: a new
// cell for the key copies it again, so that no cell keeps an older one, and
// its value, alive (and a tombstone copies it too: see deleteLocked).
func newCell[K string | []byte](key K, val []byte, gen uint64) *cell {
	c := &cell{val: val, gen: gen}
	if len(key) > shortKey {
		c.key = string(key)
		return c
	}
	n := copy(c.short[:], key)
	c.key = unsafe.String(&c.short[0], n) // short never changes once written
	return c
}

// value returns the value in c, or nil if c is nil.
func (c *cell) value() []byte {
	if c == nil {
		return nil
	}
	return c.val
}

// item is one key's entry in a stripe's index: its cell, or for a
// tombstone, a cell of its own that holds only the key and is in no table.
//
// Invariant: pre is the first 16 bytes of c.key, zero-padded, as big-endian
// integers, and n is len(c.key), or longKey if it is longer than shortKey.
// Comparing pre, then n, orders items as their keys would be ordered
// without following the cell pointer unless both keys are longer than
// shortKey: sorting and merging then stay inside the items' memory, and
// tomb tells a tombstone without reading its cell. (So an item is 32 bytes
// with one pointer, which the collector follows, not 40 with the key's
// string besides.)
type item struct {
	pre  [2]uint64
	c    *cell
	n    uint8
	tomb bool
}

// longKey is item.n for a key longer than shortKey.
const longKey = shortKey + 1

// itemOf returns the item of c, the cell of its key.
func itemOf(c *cell) item {
	return item{pre: prefix(c.key), c: c, n: uint8(min(len(c.key), longKey))}
}

// prefix packs the first 16 bytes of key, zero-padded, big-endian.
func prefix(key string) [2]uint64 {
	var b [16]byte
	copy(b[:], key)
	return [2]uint64{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

func compareItems(a, b item) int {
	if c := cmp.Compare(a.pre[0], b.pre[0]); c != 0 {
		return c
	}
	if c := cmp.Compare(a.pre[1], b.pre[1]); c != 0 {
		return c
	}
	if a.n < longKey || b.n < longKey { // equal padded prefixes: the shorter key is a prefix of the other
		return cmp.Compare(a.n, b.n)
	}
	return strings.Compare(a.c.key, b.c.key) // only the full keys can tell
}

// New returns an empty Store.
func New(opt Options) *Store {
	if opt.Stripes <= 0 {
		opt.Stripes = DefaultStripes()
	}
	if opt.MaxValue <= 0 {
		opt.MaxValue = 64 << 20
	}
	if opt.fresh <= 0 {
		opt.fresh = defaultFresh
	}
	if opt.scanSegments <= 0 {
		opt.scanSegments = scanSegments
	}
	opt.Group &= maxGroup
	n := 1 << bits.Len(uint(opt.Stripes-1))
	s := &Store{seed: maphash.MakeSeed(), hashMask: math.MaxUint64, mask: uint64(n - 1), maxValue: opt.MaxValue, stripes: make([]stripe, n), fresh: opt.fresh, scanSegments: opt.scanSegments}
	if opt.hashBits > 0 {
		s.hashMask = 1<<opt.hashBits - 1
	}
	s.ver, s.alarm = newVersions(), newAlarm()
	for i := range s.stripes {
		s.stripes[i].resetLocked(s.freshOf(i))
		s.stripes[i].ver, s.stripes[i].alarm = s.ver, s.alarm
	}
	s.sessions.t = newSessionTable(limitsOf(opt))
	s.every = make(lockSet, n)
	for i := range s.every {
		s.every[i] = i
	}
	return s
}

// DefaultStripes is 8 stripes per processor, at least 16. More stripes spread
// writers over more locks; fewer make range reads cheaper, since a range
// merges every stripe's runs.
func DefaultStripes() int { return max(16, 8*runtime.GOMAXPROCS(0)) }

// freshOf returns how many items stripe i's index gathers before sorting
// them: Options.fresh to twice that, by stripe. Keys spread evenly over the
// stripes, so indexes of one size would seal and merge in step, and their
// largest merges, each O(keys in the stripe), would fall due together and
// hold up the writes queued behind them for all of them at once.
func (s *Store) freshOf(i int) int { return s.fresh + s.fresh*i/len(s.stripes) }

func (st *stripe) resetLocked(fresh int) {
	st.mu.m = newTable(0)
	st.mu.clash = nil
	st.mu.idx = newIndex(fresh)
	st.mu.garbage = 0
	st.mu.dl = deadlines{}
	st.keys.Store(0)
	st.bytes.Store(0)
}

// hash returns key's hash: its low bits choose the key's stripe, and the
// stripe's table is keyed by all of it.
func (s *Store) hash(key []byte) uint64 { return maphash.Bytes(s.seed, key) & s.hashMask }

func (s *Store) stripeOf(key []byte) int { return int(s.hash(key) & s.mask) }

// locate returns key's stripe and hash.
func (s *Store) locate(key []byte) (*stripe, uint64) {
	h := s.hash(key)
	return &s.stripes[h&s.mask], h
}

// Len returns the number of keys.
func (s *Store) Len() int64 {
	var n int64
	for i := range s.stripes {
		n += s.stripes[i].keys.Load()
	}
	return n
}

// Bytes returns the total length of all keys and values.
func (s *Store) Bytes() int64 {
	var n int64
	for i := range s.stripes {
		n += s.stripes[i].bytes.Load()
	}
	return n
}

// lookupLocked returns the cell of key, whose hash is h, or nil.
func (st *stripe) lookupLocked(h uint64, key []byte) *cell {
	return st.matchLocked(st.mu.m.get(h), key)
}

// matchLocked returns the cell of key given c, the cell the table holds
// under key's hash (nil for none): c if it is key's, else key's cell in
// clash, or nil.
func (st *stripe) matchLocked(c *cell, key []byte) *cell {
	if c != nil && c.key == string(key) {
		return c
	}
	if st.mu.clash != nil {
		return st.mu.clash[string(key)]
	}
	return nil
}

// bindLocked makes c the cell of its key, whose hash is h, in place of
// old, the key's cell until now, or nil.
func (st *stripe) bindLocked(h uint64, old, c *cell) {
	if s, i := st.mu.m.find(h); s.slots[i].c == old { // old's place, or a free one for a new key
		st.mu.m.setAt(s, i, h, c)
		return
	}
	if st.mu.clash == nil {
		st.mu.clash = make(map[string]*cell)
	}
	st.mu.clash[c.key] = c
}

// unbindLocked removes old, its key's cell, whose hash is h.
func (st *stripe) unbindLocked(h uint64, old *cell) {
	if s, i := st.mu.m.find(h); s.slots[i].c == old {
		st.mu.m.delAt(s, i)
	} else {
		delete(st.mu.clash, old.key)
	}
}

// putLocked stores val, which the store now owns, under key, whose hash is
// h.
func (st *stripe) putLocked(h uint64, key, val []byte) {
	st.replaceLocked(st.lookupLocked(h, key), h, key, val)
}

// replaceLocked stores val under key, whose hash is h and whose cell
// lookupLocked returned as old: passing it saves a second lookup.
func (st *stripe) replaceLocked(old *cell, h uint64, key, val []byte) {
	if old == nil {
		st.insertLocked(h, key, val)
		return
	}
	st.ver.touch(key)
	st.bytes.Add(int64(len(val) - len(old.val)))
	if old.gen == st.mu.gen {
		old.val = val
		return
	}
	// A view may hold old. Reuse a long key's string: the write allocates
	// only the value and the cell.
	c := newCell(old.key, val, st.mu.gen)
	st.bindLocked(h, old, c)
	st.mu.idx.add(itemOf(c))
	st.shadowLocked(itemCost + len(old.key) + len(old.val))
}

// insertLocked stores val under key, whose hash is h and which is not in
// the stripe.
func (st *stripe) insertLocked(h uint64, key, val []byte) {
	st.ver.touch(key)
	c := newCell(key, val, st.mu.gen)
	st.bindLocked(h, nil, c)
	st.mu.idx.add(itemOf(c))
	st.keys.Add(1)
	st.bytes.Add(int64(len(key) + len(val)))
}

// deleteLocked removes key, whose hash is h, and reports whether it
// existed.
func (st *stripe) deleteLocked(h uint64, key []byte) bool {
	old := st.lookupLocked(h, key)
	if old == nil {
		return false
	}
	st.ver.touch(key)
	st.unbindLocked(h, old)
	st.clearDeadlineLocked(key)
	st.keys.Add(-1)
	st.bytes.Add(-int64(len(key) + len(old.val)))
	if old.gen == st.mu.gen {
		old.gen, old.val = deadGen, nil // its item, wherever it is, is now absent
		st.shadowLocked(itemCost + len(old.key))
	} else {
		// A view may hold old. The tombstone may outlive old's item by
		// long, so it must not keep old and its value alive: it has a cell
		// of its own, with a copy of a short key, which lives in old.
		tomb := itemOf(newCell(old.key, nil, deadGen))
		tomb.tomb = true
		st.mu.idx.add(tomb)
		st.shadowLocked(2*itemCost + len(old.key) + len(old.val))
	}
	return true
}

// Garbage accounting (see shadowLocked): what an item and its cell cost
// beyond the key and the value, roughly, and the least garbage a stripe's
// index may keep before it is merged whole.
const (
	itemCost   = 96
	minGarbage = 1 << 20
)

// shadowLocked adds n bytes to the garbage estimate: memory that the index
// keeps only for items that newer ones shadow or that are absent, until a
// merge drops them. Once it exceeds half of what the stripe's live pairs
// cost, counted the same way (and minGarbage), the index merges all of its
// runs into one, which drops them all: so garbage stays a bounded share of
// the stripe's memory, and the merge, O(items), is paid for by the writes
// that made that much garbage.
func (st *stripe) shadowLocked(n int) {
	st.mu.garbage += int64(n)
	if st.mu.garbage > max((st.bytes.Load()+itemCost*st.keys.Load())/2, minGarbage) {
		st.mu.idx.compactAll()
		st.mu.garbage = 0
	}
}

// lockSet is a sorted, duplicate-free set of stripe indexes.
type lockSet []int

func (s *Store) lockSetOf(keys [][]byte, stride int) lockSet {
	ls := make(lockSet, 0, len(keys)/stride)
	for i := 0; i < len(keys); i += stride {
		ls = append(ls, s.stripeOf(keys[i]))
	}
	slices.Sort(ls)
	return slices.Compact(ls)
}

// lockSetOfHashes returns the set of the stripes of keys with these hashes,
// appended to ls, which must be empty. A store of up to 64 stripes (the
// default on up to 8 cores) gathers them in a bitmask, which lists them in
// order with no sort.
func (s *Store) lockSetOfHashes(hashes []uint64, ls lockSet) lockSet {
	if len(s.stripes) <= 64 {
		var set uint64
		for _, h := range hashes {
			set |= 1 << (h & s.mask)
		}
		for ; set != 0; set &= set - 1 {
			ls = append(ls, bits.TrailingZeros64(set))
		}
		return ls
	}
	for _, h := range hashes {
		ls = append(ls, int(h&s.mask))
	}
	slices.Sort(ls)
	return slices.Compact(ls)
}

func (s *Store) lock(ls lockSet) {
	for _, i := range ls {
		s.stripes[i].mu.Lock()
	}
}

func (s *Store) unlock(ls lockSet) {
	for _, i := range ls {
		s.stripes[i].mu.Unlock()
	}
}

func (s *Store) runlock(ls lockSet) {
	for _, i := range ls {
		s.stripes[i].mu.RUnlock()
	}
}

// views returns a view of every stripe's index, taken at one instant, the
// number of keys then, and, if gone, the keys that had expired then but
// were not removed yet (nil if none). Cost, under every stripe's lock
// (views seal fresh, which needs the write locks): sorting what each
// index's fresh holds, up to twice defaultFresh items a stripe, and
// merging the small runs that leaves (see index.tidy); and gathering the
// expired keys, of which the expirer leaves few, but as many as a mass
// expiry has not yet removed.
func (s *Store) views(gone bool) ([][]run, int, map[string]bool) {
	s.lockQuiet(s.every)
	defer s.unlock(s.every)
	views, n := make([][]run, len(s.stripes)), 0
	for i := range s.stripes {
		st := &s.stripes[i]
		views[i] = st.mu.idx.view()
		st.mu.gen++ // the view may share every cell made so far
		n += int(st.keys.Load())
	}
	if !gone {
		return views, n, nil
	}
	return views, n, s.expiredLocked(s.nowMs())
}

func equal(a, b []byte) bool { return bytes.Equal(a, b) }
