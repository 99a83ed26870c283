package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// writeRecorder is a connection that records each write, or fails them
// all with err.
type writeRecorder struct {
	net.Conn
	writes [][]byte
	err    error
}

func (c *writeRecorder) Write(b []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	c.writes = append(c.writes, bytes.Clone(b))
	return len(b), nil
}

// writingPeer is a peer whose writer may be called directly.
func writingPeer() *peer {
	t := &Transport{cfg: Config{MaxFrameBytes: DefaultMaxFrameBytes}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), notify: newNotifier()}
	return &peer{t: t, id: 2, ctx: context.Background()}
}

// TestWriteInChunks: what the writer took from the queue goes out in
// order, in writes of at most writeChunk bytes unless one message is
// larger, each message let go of once encoded, so that the writer never
// holds all it took twice (a follower's catch-up, 16 MiB in flight).
func TestWriteInChunks(t *testing.T) {
	var big, small []raftpb.Message
	for i := range 12 {
		big = append(big, msg(uint64(i), make([]byte, 700<<10)))
	}
	for i := range 50 {
		small = append(small, msg(uint64(100+i), []byte("x")))
	}
	huge := []raftpb.Message{msg(200, make([]byte, 3*writeChunk))}
	batches := []batch{{9, small[:10]}, {9, big}, {9, small[10:]}, {4, huge}, {9, cloneMessages(small[:1])}}
	var want []raftpb.Message
	for _, b := range batches {
		want = append(want, b.msgs...)
	}
	want = cloneMessages(want) // the writer clears what it encodes

	c := &writeRecorder{}
	p := writingPeer()
	if _, err := p.write(c, nil, batches); err != nil {
		t.Fatal(err)
	}
	var all []byte
	for i, w := range c.writes {
		if len(w) > writeChunk && len(decodeFrames(t, w)) > 1 {
			t.Errorf("write %d: %d bytes, over %d with %d messages", i, len(w), writeChunk, len(decodeFrames(t, w)))
		}
		all = append(all, w...)
	}
	got := decodeFrames(t, all)
	if len(got) != len(want) {
		t.Fatalf("%d messages written, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Index != want[i].Index || len(got[i].Entries[0].Data) != len(want[i].Entries[0].Data) {
			t.Fatalf("message %d: index %d of %d bytes, want %d of %d", i, got[i].Index, len(got[i].Entries[0].Data),
				want[i].Index, len(want[i].Entries[0].Data))
		}
	}
	if len(c.writes) < 5 {
		t.Errorf("%d writes of %d bytes: want them in writes of at most %d", len(c.writes), len(all), writeChunk)
	}
	for i, b := range batches {
		if len(b.msgs) != 0 {
			t.Errorf("batch %d: the writer still holds %d messages", i, len(b.msgs))
		}
	}
	if s := p.sent.Load(); s != uint64(len(want)) || p.dropped.Load() != 0 {
		t.Errorf("%d sent, %d dropped; want %d sent", s, p.dropped.Load(), len(want))
	}

	// One write of small batches, as before chunks.
	c, p = &writeRecorder{}, writingPeer()
	if _, err := p.write(c, nil, []batch{{9, cloneMessages(small[:20])}, {9, cloneMessages(small[20:])}}); err != nil {
		t.Fatal(err)
	}
	if len(c.writes) != 1 || len(decodeFrames(t, c.writes[0])) != len(small) {
		t.Errorf("%d small messages went in %d writes, want 1", len(small), len(c.writes))
	}

	// A failed write drops what it held and everything after it.
	c, p = &writeRecorder{err: errors.New("broken")}, writingPeer()
	if _, err := p.write(c, nil, []batch{{9, cloneMessages(big)}}); err == nil {
		t.Fatal("a failed write returned no error")
	}
	if p.sent.Load() != 0 || p.dropped.Load() != uint64(len(big)) {
		t.Errorf("after a failed write: %d sent, %d dropped; want 0 and %d", p.sent.Load(), p.dropped.Load(), len(big))
	}
}

func cloneMessages(msgs []raftpb.Message) []raftpb.Message {
	return append([]raftpb.Message(nil), msgs...)
}
