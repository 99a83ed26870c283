package replica

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/seedtest"
	"github.com/flintkv/flint/internal/transport"
)

// inflightMeter counts, on each link from a member to another in a term,
// the bytes of the distinct entries (as raft counts them: their data)
// sent in append messages that the receiver has not acknowledged, and the
// most there ever were. Members send through it: an append is counted
// before it goes, and freed once the receiver sends an acknowledgement
// that covers it, which it does once the entries are durable in its log.
// An append sent again before it is acknowledged is counted once: raft,
// while it probes a follower, sends its probe again at every heartbeat
// that follower answers (one message, at most maxMsgBytes, a heartbeat)
// and does not count them in its in-flight bound.
type inflightMeter struct {
	mu    sync.Mutex
	sent  map[link]map[span]int64 // the appends not acknowledged, and their bytes
	bytes map[link]int64
	peak  map[link]int64
}

// link is the direction from one member to another, in one term: a
// leader that leads again in a later term starts afresh, as its follower
// ignores what it sent in the earlier one and never acknowledges it.
type link struct{ from, to, term uint64 }

// span is the entries of an append: after index, up to last.
type span struct{ index, last uint64 }

func newInflightMeter() *inflightMeter {
	return &inflightMeter{sent: map[link]map[span]int64{}, bytes: map[link]int64{}, peak: map[link]int64{}}
}

// wrap returns a member's sender that counts through m.
func (m *inflightMeter) wrap(s transport.Sender) transport.Sender { return meteredSender{s, m} }

type meteredSender struct {
	transport.Sender
	m *inflightMeter
}

func (s meteredSender) Send(to, group uint64, msgs []raftpb.Message) {
	s.m.note(msgs) // before the receiver can answer
	s.Sender.Send(to, group, msgs)
}

// note counts the appends in msgs, and frees those that the
// acknowledgements in msgs cover.
func (m *inflightMeter) note(msgs []raftpb.Message) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, msg := range msgs {
		switch {
		case msg.Type == raftpb.MsgApp && len(msg.Entries) > 0:
			l, sp := link{msg.From, msg.To, msg.Term}, span{msg.Index, msg.Entries[len(msg.Entries)-1].Index}
			if m.sent[l] == nil {
				m.sent[l] = map[span]int64{}
			}
			if _, again := m.sent[l][sp]; !again {
				m.sent[l][sp] = entryBytes(msg.Entries)
				m.bytes[l] += m.sent[l][sp]
				m.peak[l] = max(m.peak[l], m.bytes[l])
			}
		case msg.Type == raftpb.MsgAppResp && !msg.Reject:
			l := link{msg.To, msg.From, msg.Term}
			for sp, n := range m.sent[l] {
				if sp.last <= msg.Index {
					delete(m.sent[l], sp)
					m.bytes[l] -= n
				}
			}
		}
	}
}

// forget drops what was sent to member to: it was down, so that none of
// it arrived, nor will be acknowledged.
func (m *inflightMeter) forget(to uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for l := range m.sent {
		if l.to == to {
			delete(m.sent, l)
			m.bytes[l], m.peak[l] = 0, 0
		}
	}
}

// peakTo returns the most bytes in flight to member to on any link.
func (m *inflightMeter) peakTo(to uint64) (peak int64, on link) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for l, p := range m.peak {
		if l.to == to && p > peak {
			peak, on = p, l
		}
	}
	return peak, on
}

// TestClusterCatchUpInflightBounded stops a follower while the leader
// logs several times maxInflightBytes, then restarts it: it catches up
// from the leader's log, and the distinct entries in flight to it that it
// has not acknowledged, counted on the way, never pass raft's bound
// (maxInflightBytes, and the message that reaches it) and one probe more:
// raft may send its probe again at a heartbeat answered before the probe's
// acknowledgement reached it, to be in flight beside the first window. The
// leader sends as much as the bound lets at once when the follower's
// acknowledgement of the probe puts it back to replicating, before the
// follower could acknowledge any of it: so the window fills, whatever the
// timing. The follower then holds no more than that unwritten, and never
// makes its raft loop wait for its append thread (maxAppendBytes).
func TestClusterCatchUpInflightBounded(t *testing.T) {
	defer func(n uint64) { maxInflightBytes = n }(maxInflightBytes)
	maxInflightBytes = 2 * maxMsgBytes
	m := newInflightMeter()
	c := newClusterSending(t, 3, seedtest.Seed(t),
		Options{TickInterval: 5 * time.Millisecond, SnapshotEntries: 1 << 40, SnapshotBytes: 1 << 40}, m.wrap)
	c.set("k", "0")
	lag := (c.leader() + 1) % 3
	c.stop(lag)
	const writes = 192 // 6 MiB: three windows
	value := strings.Repeat("v", 32<<10)
	for i := range writes {
		c.set(fmt.Sprint("k", i), value)
	}
	m.forget(uint64(lag + 1))
	c.start(lag)
	last := fmt.Sprint("k", writes-1)
	for try, deadline := 0, time.Now().Add(time.Minute); ; try++ {
		if v, err := c.read(lag, last); err == nil && v == value {
			break
		}
		if try == 1000 || time.Now().After(deadline) {
			t.Fatalf("member %d did not catch up in %d tries within a minute", lag+1, try+1)
		}
		time.Sleep(10 * time.Millisecond)
	}
	peak, on := m.peakTo(uint64(lag + 1))
	t.Logf("at most %d bytes of entries in flight from member %d to member %d in term %d (bound %d, messages of %d)",
		peak, on.from, lag+1, on.term, maxInflightBytes, maxMsgBytes)
	if peak > int64(maxInflightBytes+2*maxMsgBytes) {
		t.Errorf("%d bytes of entries were in flight to member %d, catching up, past the bound of %d and two messages of %d",
			peak, lag+1, maxInflightBytes, maxMsgBytes)
	}
	if peak < int64(maxInflightBytes) {
		t.Errorf("test bug: at most %d bytes were in flight to member %d: the window of %d never filled", peak, lag+1, maxInflightBytes)
	}
	if w := c.rs[lag].stats.appendWaits.Load(); w != 0 {
		t.Errorf("member %d, catching up, held back %d messages from its append thread", lag+1, w)
	}
}
