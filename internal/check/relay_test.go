package check

import (
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/transport"
)

// counter is a transport.Handler that counts the messages it receives.
type counter struct{ n atomic.Int64 }

func (c *counter) Receive(_, _ uint64, msgs []raftpb.Message) { c.n.Add(int64(len(msgs))) }
func (c *counter) ReceiveSnapshot(uint64, uint64, raftpb.Message, io.Reader) error {
	return nil
}
func (c *counter) Unreachable(uint64, uint64)         {}
func (c *counter) SnapshotDone(uint64, uint64, error) {}

// TestRelayCuts runs two transports, node 2 behind a relay: node 1's
// messages get through until the relay cuts node 1 off, none does while it
// is cut, and they get through again once it is healed.
func TestRelayCuts(t *testing.T) {
	secret := []byte("relay test secret")
	start := func(id uint64, h transport.Handler) (*transport.Transport, string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tr, err := transport.New(transport.Config{NodeID: id, ClusterID: 9, Secret: secret, Listener: ln,
			Handler: h, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr, ln.Addr().String()
	}
	var got counter
	a, _ := start(1, &counter{})
	_, bAddr := start(2, &got)
	rl, err := newRelay(2, bAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer rl.close()
	a.SetPeer(2, rl.addr())
	// through sends a message every 10 ms for up to d and reports whether
	// any arrived.
	through := func(d time.Duration) bool {
		before := got.n.Load()
		for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			a.Send(2, 1, []raftpb.Message{{Type: raftpb.MsgHeartbeat, To: 2, From: 1}})
			if got.n.Load() > before {
				return true
			}
		}
		return false
	}
	if !through(5 * time.Second) {
		t.Fatal("no message got through the relay")
	}
	rl.setCut(map[uint64]bool{1: true})
	time.Sleep(50 * time.Millisecond) // what was in flight lands
	if through(time.Second) {
		t.Fatal("a message got through while node 1 was cut off")
	}
	rl.setCut(nil)
	if !through(5 * time.Second) {
		t.Fatal("no message got through after the cut healed")
	}
}
