package store

import (
	"container/heap"
	"slices"
)

// merge yields the present items of several stripes' runs in one key order,
// each key once, as its newest item says. A key's items can only be in one
// stripe's runs; among them, a newer run's item comes first and shadows the
// rest.
type merge struct {
	end       string
	unbounded bool // ignore end
	cur       mergeHeap
}

// cursor is the unread part of one run.
type cursor struct {
	items run // never empty while in the heap
	age   int // the run's place among its stripe's runs: higher is newer
}

type mergeHeap []*cursor

func (h mergeHeap) Len() int { return len(h) }
func (h mergeHeap) Less(i, j int) bool {
	if c := compareItems(h[i].items[0], h[j].items[0]); c != 0 {
		return c < 0
	}
	return h[i].age > h[j].age
}
func (h mergeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)   { *h = append(*h, x.(*cursor)) }
func (h *mergeHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// newMerge starts a merge of views (each a stripe's runs, oldest first) at
// start. It stops after end unless unbounded.
func newMerge(views [][]run, start, end string, unbounded bool) *merge {
	m := &merge{end: end, unbounded: unbounded}
	from := itemOf(&cell{key: start})
	for _, runs := range views {
		for age, r := range runs {
			if i, _ := slices.BinarySearchFunc(r, from, compareItems); i < len(r) {
				m.cur = append(m.cur, &cursor{items: r[i:], age: age})
			}
		}
	}
	heap.Init(&m.cur)
	return m
}

// next returns the next present item, or false when there is none up to end.
func (m *merge) next() (item, bool) {
	for len(m.cur) > 0 {
		it := m.pop()
		if !m.unbounded && it.c.key > m.end {
			m.cur = nil
			break
		}
		for len(m.cur) > 0 && compareItems(m.cur[0].items[0], it) == 0 {
			m.pop() // shadowed by it
		}
		if !it.absent() {
			return it, true
		}
	}
	return item{}, false
}

// pop removes and returns the smallest item, the newest of its key.
func (m *merge) pop() item {
	c := m.cur[0]
	it := c.items[0]
	if c.items = c.items[1:]; len(c.items) == 0 {
		heap.Pop(&m.cur)
	} else {
		heap.Fix(&m.cur, 0)
	}
	return it
}
