package replica

import (
	"errors"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// TestSnapshotRetries checks the waits before a failed snapshot stream is
// reported: about snapshotRetryMin after the first failure in a row,
// doubling up to snapshotRetryMax, none after a success, for each member
// on its own.
func TestSnapshotRetries(t *testing.T) {
	var s snapshotRetries
	failed := errors.New("refused")
	want := snapshotRetryMin
	for range 10 {
		if d := s.after(2, failed); d < want/2 || d > want {
			t.Fatalf("wait %v after a failure, want %v to %v", d, want/2, want)
		}
		want = min(2*want, snapshotRetryMax)
	}
	if d := s.after(3, failed); d > snapshotRetryMin {
		t.Fatalf("member 3's first failure waits %v, want at most %v", d, snapshotRetryMin)
	}
	if d := s.after(2, nil); d != 0 {
		t.Fatalf("a success waits %v", d)
	}
	if d := s.after(2, failed); d > snapshotRetryMin {
		t.Fatalf("the first failure after a success waits %v, want at most %v", d, snapshotRetryMin)
	}
}

// TestReceiveQueueBytesBounded: messages from other members wait for the
// raft loop up to recvQueueBytes of entries' data; more are dropped, but a
// message larger than that alone is taken into an empty queue.
func TestReceiveQueueBytesBounded(t *testing.T) {
	r := &Replica{id: 1, recvc: make(chan raftpb.Message, recvQueue)}
	app := func(size int) raftpb.Message {
		return raftpb.Message{Type: raftpb.MsgApp, From: 2, To: 1, Entries: []raftpb.Entry{{Data: make([]byte, size)}}}
	}
	for range 5 {
		r.Receive(2, 1, []raftpb.Message{app(20 << 20)})
	}
	if len(r.recvc) != 3 || r.DroppedMessages() != 2 || r.recvBytes.Load() != 60<<20 {
		t.Fatalf("after 5 messages of 20 MiB: %d queued (%d bytes), %d dropped; want 3 queued, 2 dropped",
			len(r.recvc), r.recvBytes.Load(), r.DroppedMessages())
	}
	r.Receive(2, 1, []raftpb.Message{{Type: raftpb.MsgHeartbeat, From: 2, To: 1}})
	if len(r.recvc) != 4 {
		t.Fatalf("a heartbeat, with no entries, was dropped from a queue full of bytes")
	}
	for len(r.recvc) > 0 { // as stepPeer takes them
		m := <-r.recvc
		r.recvBytes.Add(-entryBytes(m.Entries))
	}
	r.Receive(2, 1, []raftpb.Message{app(100 << 20)})
	if len(r.recvc) != 1 || r.DroppedMessages() != 2 {
		t.Fatalf("a message of 100 MiB into an empty queue: %d queued, %d dropped; want it taken", len(r.recvc), r.DroppedMessages())
	}
}
