package multiraft

import (
	"errors"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/wal"
)

// queue is the groups with work, each at most once, for the workers.
type queue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	groups []*group
	closed bool
}

func (q *queue) init() { q.cond = sync.NewCond(&q.mu) }

// push queues g unless it is queued already.
func (q *queue) push(g *group) {
	if !g.queued.CompareAndSwap(false, true) {
		return
	}
	q.mu.Lock()
	q.groups = append(q.groups, g)
	q.mu.Unlock()
	q.cond.Signal()
}

// pop waits for a group, and returns nil once the queue is closed.
func (q *queue) pop() *group {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.groups) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return nil
	}
	g := q.groups[0]
	q.groups[0] = nil
	q.groups = q.groups[1:]
	return g
}

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// work is a worker: it processes the groups queued, one at a time. A group
// is taken off the queue before it is processed, so that what arrives
// meanwhile queues it again.
func (h *Host) work() {
	defer h.wg.Done()
	for g := h.queue.pop(); g != nil; g = h.queue.pop() {
		g.queued.Store(false)
		h.process(g)
	}
}

// writer is the groups' writes waiting for the log writer.
type writer struct {
	mu      sync.Mutex
	cond    *sync.Cond
	pending []pendingWrite
	closed  bool
}

type pendingWrite struct {
	g    *group
	w    wal.Write
	snap *raftpb.Snapshot // the snapshot that w.Restart installs, or nil
}

func (w *writer) init() { w.cond = sync.NewCond(&w.mu) }

func (w *writer) submit(g *group, x wal.Write, s *raftpb.Snapshot) {
	w.mu.Lock()
	w.pending = append(w.pending, pendingWrite{g, x, s})
	w.mu.Unlock()
	w.cond.Signal()
}

// take waits for writes and returns them all, appending to buf, or
// returns nil once the writer is closed.
func (w *writer) take(buf []pendingWrite) []pendingWrite {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.pending) == 0 && !w.closed {
		w.cond.Wait()
	}
	if w.closed {
		return nil
	}
	buf = append(buf, w.pending...)
	clear(w.pending)
	w.pending = w.pending[:0]
	return buf
}

func (w *writer) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cond.Broadcast()
}

// writeLoop is the log writer: it saves every write waiting, of whatever
// groups, with one Save (one fsync), then tells each group's raft storage
// and queues the group for a worker to finish its Ready. A failed write
// stops the host: the log refuses writes after it (see wal.Save), a full
// disk among them.
func (h *Host) writeLoop() {
	defer h.wg.Done()
	var batch []pendingWrite
	var ws []wal.Write
	for {
		batch = h.writer.take(batch[:0])
		if batch == nil {
			return
		}
		ws = ws[:0]
		for _, p := range batch {
			ws = append(ws, p.w)
		}
		if err := h.cfg.Log.Save(ws); err != nil {
			h.fail(err)
			return
		}
		for _, p := range batch {
			// The snapshot's file is durable (see ReceiveSnapshot), and
			// now the log's restart after it.
			if p.snap != nil {
				if err := p.g.storage.ApplySnapshot(*p.snap); err != nil && !errors.Is(err, raft.ErrSnapOutOfDate) {
					h.fail(err)
					return
				}
			}
			if err := p.g.storage.Append(p.w.Entries); err != nil {
				h.fail(err)
				return
			}
			if !raft.IsEmptyHardState(p.w.HardState) {
				p.g.storage.SetHardState(p.w.HardState)
			}
			p.g.written()
			h.queue.push(p.g)
		}
		clear(batch)
		clear(ws)
	}
}

// tickLoop ticks every group that is not quiesced, and sends every peer
// node the host's own heartbeat, once per tick.
func (h *Host) tickLoop() {
	defer h.wg.Done()
	t := time.NewTicker(h.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		h.live.beat(h.cfg.Sender)
		h.askSnapshots()
		for _, g := range h.groupList() {
			if g.quiesced.Load() && !h.live.silent(g.qlead.Load(), h.cfg.ElectionTicks) {
				continue
			}
			g.wake()
			g.tick()
			h.queue.push(g)
		}
	}
}

// askSnapshots asks the groups that keep the log's oldest segment to
// snapshot, once the log is longer than Config.MaxLogBytes, so that the
// segment can go (as TiKV's raft-engine does). A group that takes no
// snapshots is asked in vain: it keeps the log.
func (h *Host) askSnapshots() {
	if h.cfg.Log.Metrics().LogBytes <= h.cfg.MaxLogBytes {
		return
	}
	for _, id := range h.cfg.Log.Holders() {
		if g := h.group(id); g != nil && g.snapper != nil && !g.askSnap.Swap(true) {
			h.queue.push(g)
		}
	}
}
