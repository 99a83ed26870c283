package store

import (
	"container/heap"

	"github.com/google/btree"
)

// merge yields the pairs of several B-trees in one key order. Each tree is
// read in pages so that a long range costs memory for one page per tree.
// Pages start small and double as a tree is consumed: a short range over
// many trees then reads few items it does not return.
type merge struct {
	end       string
	unbounded bool // ignore end
	cur       mergeHeap
	trees     []*btree.BTreeG[item]
}

// Page sizes: the first page of each tree, and the largest.
const (
	firstPage = 4
	pageSize  = 64
)

// cursor is a page of one tree's items, consumed from the front.
type cursor struct {
	tree  int
	items []item // unread part of the page
	buf   []item // the page's storage, reused by the next page when it fits
	page  int    // size of the next page
	more  bool   // the tree may hold more items after the page
}

type mergeHeap []*cursor

func (h mergeHeap) Len() int           { return len(h) }
func (h mergeHeap) Less(i, j int) bool { return h[i].items[0].key < h[j].items[0].key }
func (h mergeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)        { *h = append(*h, x.(*cursor)) }
func (h *mergeHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// newMerge starts a merge at start. It stops after end unless unbounded,
// which must be known before the first pages are filled.
func newMerge(trees []*btree.BTreeG[item], start, end string, unbounded bool) *merge {
	m := &merge{end: end, unbounded: unbounded, trees: trees}
	for i := range trees {
		c := &cursor{tree: i, page: firstPage}
		if m.fill(c, start, true) {
			m.cur = append(m.cur, c)
		}
	}
	heap.Init(&m.cur)
	return m
}

// fill reads the next page of c's tree from 'from' (inclusive or not) up to
// the end key, and reports whether the page is non-empty.
func (m *merge) fill(c *cursor, from string, inclusive bool) bool {
	if cap(c.buf) < c.page {
		c.buf = make([]item, 0, c.page)
	}
	c.items = c.buf[:0]
	c.more = false
	defer func() { c.page = min(2*c.page, pageSize) }()
	m.trees[c.tree].AscendGreaterOrEqual(probe(from), func(it item) bool {
		if it.key > m.end && !m.unbounded {
			return false
		}
		if !inclusive && it.key == from {
			return true
		}
		if len(c.items) == c.page {
			c.more = true
			return false
		}
		c.items = append(c.items, it)
		return true
	})
	return len(c.items) > 0
}

func (m *merge) next() (item, bool) {
	if len(m.cur) == 0 {
		return item{}, false
	}
	c := m.cur[0]
	it := c.items[0]
	c.items = c.items[1:]
	if len(c.items) == 0 && !(c.more && m.fill(c, it.key, false)) {
		heap.Pop(&m.cur)
	} else {
		heap.Fix(&m.cur, 0)
	}
	return it, true
}
