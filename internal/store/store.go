// Package store is Flint's state machine: an in-memory map from binary keys
// to binary values with an ordered index for range reads.
//
// It changes only by applying entries (see AppendEntry for their format), the
// same bytes the raft log carries, and answers reads directly. It has no
// network, disk, clock or goroutines of its own, and the outcome of applying a
// sequence of entries depends on nothing else.
//
// The map is split into shards, each with its own lock, so that commands on
// different keys run on different cores without contending. A command that
// touches several keys locks their shards in ascending order and is atomic as
// a whole. Each shard keeps a hash table for point reads (see table) and,
// for ordered reads, an index that a write appends to rather than searches
// (see index).
// The index's sorted runs never change once made, so taking them under the
// locks gives a consistent view that range reads and snapshots iterate
// without holding any lock, and neither stalls writes for longer than
// taking the views does.
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
	Shards   int // number of shards, rounded up to a power of two; default DefaultShards()
	MaxValue int // longest value APPEND may build, in bytes; default 64 MiB

	fresh    int // items an index gathers before sorting them; default defaultFresh (tests set less)
	hashBits int // tests only: keep this many low bits of each hash (0: all), so that keys clash; at most 9 (see table)
}

// Store is the state machine. All methods are safe for concurrent use.
type Store struct {
	seed     maphash.Seed
	hashMask uint64 // see Options.hashBits
	mask     uint64
	maxValue int
	shards   []shard
	every    lockSet // every shard, in order
	retain   bool    // see Retain
	fresh    int     // see Options.fresh
}

// shard owns the keys that hash to it.
type shard struct {
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
		// shard's choice computed already, has slots of 16 bytes with one
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
	}
	keys  atomic.Int64 // number of keys, written under mu
	bytes atomic.Int64 // sum of key and value lengths, written under mu
	_     [64]byte     // keep neighbouring shards' locks off one cache line
}

// cell holds one key's value; the shard's table and the key's item in the
// index both point to it. So a write to a key changes only its cell, and
// leaves the table and the index alone, unless a view of the index may share
// the cell.
//
// Invariant: a cell with gen equal to its shard's gen was made after the
// index's last view, so no view holds it, and a write may change its val in
// place, under the shard's lock; deleting its key marks it dead (gen
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

// item is one key's entry in a shard's index: its cell, or for a
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
	if opt.Shards <= 0 {
		opt.Shards = DefaultShards()
	}
	if opt.MaxValue <= 0 {
		opt.MaxValue = 64 << 20
	}
	if opt.fresh <= 0 {
		opt.fresh = defaultFresh
	}
	n := 1 << bits.Len(uint(opt.Shards-1))
	s := &Store{seed: maphash.MakeSeed(), hashMask: math.MaxUint64, mask: uint64(n - 1), maxValue: opt.MaxValue, shards: make([]shard, n), fresh: opt.fresh}
	if opt.hashBits > 0 {
		s.hashMask = 1<<opt.hashBits - 1
	}
	for i := range s.shards {
		s.shards[i].resetLocked(s.freshOf(i))
	}
	s.every = make(lockSet, n)
	for i := range s.every {
		s.every[i] = i
	}
	return s
}

// DefaultShards is 8 shards per processor, at least 16. More shards spread
// writers over more locks; fewer make range reads cheaper, since a range
// merges every shard's runs.
func DefaultShards() int { return max(16, 8*runtime.GOMAXPROCS(0)) }

// freshOf returns how many items shard i's index gathers before sorting
// them: Options.fresh to twice that, by shard. Keys spread evenly over the
// shards, so indexes of one size would seal and merge in step, and their
// largest merges, each O(keys in the shard), would fall due together and
// hold up the writes queued behind them for all of them at once.
func (s *Store) freshOf(i int) int { return s.fresh + s.fresh*i/len(s.shards) }

func (sh *shard) resetLocked(fresh int) {
	sh.mu.m = newTable(0)
	sh.mu.clash = nil
	sh.mu.idx = newIndex(fresh)
	sh.mu.garbage = 0
	sh.keys.Store(0)
	sh.bytes.Store(0)
}

// hash returns key's hash: its low bits choose the key's shard, and the
// shard's table is keyed by all of it.
func (s *Store) hash(key []byte) uint64 { return maphash.Bytes(s.seed, key) & s.hashMask }

func (s *Store) shardOf(key []byte) int { return int(s.hash(key) & s.mask) }

// locate returns key's shard and hash.
func (s *Store) locate(key []byte) (*shard, uint64) {
	h := s.hash(key)
	return &s.shards[h&s.mask], h
}

// Len returns the number of keys.
func (s *Store) Len() int64 {
	var n int64
	for i := range s.shards {
		n += s.shards[i].keys.Load()
	}
	return n
}

// Bytes returns the total length of all keys and values.
func (s *Store) Bytes() int64 {
	var n int64
	for i := range s.shards {
		n += s.shards[i].bytes.Load()
	}
	return n
}

// getLocked returns the value of key, whose hash is h; the shard's lock
// must be held.
func (sh *shard) getLocked(h uint64, key []byte) ([]byte, bool) {
	c := sh.lookupLocked(h, key)
	return c.value(), c != nil
}

// lookupLocked returns the cell of key, whose hash is h, or nil.
func (sh *shard) lookupLocked(h uint64, key []byte) *cell {
	return sh.matchLocked(sh.mu.m.get(h), key)
}

// matchLocked returns the cell of key given c, the cell the table holds
// under key's hash (nil for none): c if it is key's, else key's cell in
// clash, or nil.
func (sh *shard) matchLocked(c *cell, key []byte) *cell {
	if c != nil && c.key == string(key) {
		return c
	}
	if sh.mu.clash != nil {
		return sh.mu.clash[string(key)]
	}
	return nil
}

// bindLocked makes c the cell of its key, whose hash is h, in place of
// old, the key's cell until now, or nil.
func (sh *shard) bindLocked(h uint64, old, c *cell) {
	if s, i := sh.mu.m.find(h); s.slots[i].c == old { // old's place, or a free one for a new key
		sh.mu.m.setAt(s, i, h, c)
		return
	}
	if sh.mu.clash == nil {
		sh.mu.clash = make(map[string]*cell)
	}
	sh.mu.clash[c.key] = c
}

// unbindLocked removes old, its key's cell, whose hash is h.
func (sh *shard) unbindLocked(h uint64, old *cell) {
	if s, i := sh.mu.m.find(h); s.slots[i].c == old {
		sh.mu.m.delAt(s, i)
	} else {
		delete(sh.mu.clash, old.key)
	}
}

// putLocked stores val, which the store now owns, under key, whose hash is
// h.
func (sh *shard) putLocked(h uint64, key, val []byte) {
	sh.replaceLocked(sh.lookupLocked(h, key), h, key, val)
}

// replaceLocked stores val under key, whose hash is h and whose cell
// lookupLocked returned as old: passing it saves a second lookup.
func (sh *shard) replaceLocked(old *cell, h uint64, key, val []byte) {
	if old == nil {
		sh.insertLocked(h, key, val)
		return
	}
	sh.bytes.Add(int64(len(val) - len(old.val)))
	if old.gen == sh.mu.gen {
		old.val = val
		return
	}
	// A view may hold old. Reuse a long key's string: the write allocates
	// only the value and the cell.
	c := newCell(old.key, val, sh.mu.gen)
	sh.bindLocked(h, old, c)
	sh.mu.idx.add(itemOf(c))
	sh.shadowLocked(itemCost + len(old.key) + len(old.val))
}

// insertLocked stores val under key, whose hash is h and which is not in
// the shard.
func (sh *shard) insertLocked(h uint64, key, val []byte) {
	c := newCell(key, val, sh.mu.gen)
	sh.bindLocked(h, nil, c)
	sh.mu.idx.add(itemOf(c))
	sh.keys.Add(1)
	sh.bytes.Add(int64(len(key) + len(val)))
}

// deleteLocked removes key, whose hash is h, and reports whether it
// existed.
func (sh *shard) deleteLocked(h uint64, key []byte) bool {
	old := sh.lookupLocked(h, key)
	if old == nil {
		return false
	}
	sh.unbindLocked(h, old)
	sh.keys.Add(-1)
	sh.bytes.Add(-int64(len(key) + len(old.val)))
	if old.gen == sh.mu.gen {
		old.gen, old.val = deadGen, nil // its item, wherever it is, is now absent
		sh.shadowLocked(itemCost + len(old.key))
	} else {
		// A view may hold old. The tombstone may outlive old's item by
		// long, so it must not keep old and its value alive: it has a cell
		// of its own, with a copy of a short key, which lives in old.
		tomb := itemOf(newCell(old.key, nil, deadGen))
		tomb.tomb = true
		sh.mu.idx.add(tomb)
		sh.shadowLocked(2*itemCost + len(old.key) + len(old.val))
	}
	return true
}

// Garbage accounting (see shadowLocked): what an item and its cell cost
// beyond the key and the value, roughly, and the least garbage a shard's
// index may keep before it is merged whole.
const (
	itemCost   = 96
	minGarbage = 1 << 20
)

// shadowLocked adds n bytes to the garbage estimate: memory that the index
// keeps only for items that newer ones shadow or that are absent, until a
// merge drops them. Once it exceeds half of what the shard's live pairs
// cost, counted the same way (and minGarbage), the index merges all of its
// runs into one, which drops them all: so garbage stays a bounded share of
// the shard's memory, and the merge, O(items), is paid for by the writes
// that made that much garbage.
func (sh *shard) shadowLocked(n int) {
	sh.mu.garbage += int64(n)
	if sh.mu.garbage > max((sh.bytes.Load()+itemCost*sh.keys.Load())/2, minGarbage) {
		sh.mu.idx.compactAll()
		sh.mu.garbage = 0
	}
}

// lockSet is a sorted, duplicate-free set of shard indexes.
type lockSet []int

func (s *Store) lockSetOf(keys [][]byte, stride int) lockSet {
	ls := make(lockSet, 0, len(keys)/stride)
	for i := 0; i < len(keys); i += stride {
		ls = append(ls, s.shardOf(keys[i]))
	}
	slices.Sort(ls)
	return slices.Compact(ls)
}

// lockSetOfHashes returns the set of the shards of keys with these hashes,
// appended to ls, which must be empty. A store of up to 64 shards (the
// default on up to 8 cores) gathers them in a bitmask, which lists them in
// order with no sort.
func (s *Store) lockSetOfHashes(hashes []uint64, ls lockSet) lockSet {
	if len(s.shards) <= 64 {
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
		s.shards[i].mu.Lock()
	}
}

func (s *Store) unlock(ls lockSet) {
	for _, i := range ls {
		s.shards[i].mu.Unlock()
	}
}

func (s *Store) rlock(ls lockSet) {
	for _, i := range ls {
		s.shards[i].mu.RLock()
	}
}

func (s *Store) runlock(ls lockSet) {
	for _, i := range ls {
		s.shards[i].mu.RUnlock()
	}
}

// views returns a view of every shard's index, taken at one instant, and
// the number of keys then. Cost, under every shard's lock (views seal fresh,
// which needs the write locks): sorting what each index's fresh holds, up
// to twice defaultFresh items a shard, and merging the small runs that
// leaves (see index.tidy).
func (s *Store) views() ([][]run, int) {
	s.lock(s.every)
	defer s.unlock(s.every)
	views, n := make([][]run, len(s.shards)), 0
	for i := range s.shards {
		sh := &s.shards[i]
		views[i] = sh.mu.idx.view()
		sh.mu.gen++ // the view may share every cell made so far
		n += int(sh.keys.Load())
	}
	return views, n
}

func equal(a, b []byte) bool { return bytes.Equal(a, b) }
