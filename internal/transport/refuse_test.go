package transport

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// TestGarbageRefused: a connection whose first bytes are not a good
// handshake is told why, closed and logged, and the node goes on serving
// its peers.
func TestGarbageRefused(t *testing.T) {
	checkGoroutines(t)
	a, b := startNode(t, 1, ""), startNode(t, 2, "")
	good := hello{version: version, kind: kindMessages, cluster: cluster, from: 1, to: 2}
	badCRC := appendFrame(nil, typeHello, 0, good.encode())
	badCRC[headerSize+3] ^= 1
	otherVersion := good
	otherVersion.version = 3
	for _, c := range []struct {
		name, send, logged string
	}{
		{"http", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "frame over the size limit"},
		{"bad checksum", string(badCRC), "checksum mismatch"},
		{"bad magic", string(appendFrame(nil, typeHello, 0, []byte("REDIS0011xxxxxxxxxxxx"))), "bad magic"},
		{"other version", string(appendFrame(nil, typeHello, 0, otherVersion.encode())), "protocol version 3"},
		{"proof first", string(appendFrame(nil, typeProof, 0, make([]byte, macLen))), "malformed frame"},
		{"cut short", string(badCRC[:10]), "unexpected EOF"},
	} {
		t.Run(c.name, func(t *testing.T) {
			reply := rawExchange(t, b.addr, []byte(c.send))
			waitFor(t, func() bool { return b.log.has(c.logged) }, "node 2 to log %q; its log:\n%s", c.logged, b.log)
			if c.name != "cut short" && !bytes.Contains(reply, []byte(c.logged)) {
				t.Errorf("the reply %q does not say %q", reply, c.logged)
			}
		})
	}
	connect(t, a, b)
	a.Send(2, 1, []raftpb.Message{msg(1, nil)})
	waitFor(t, func() bool { return len(b.h.messages(1, 1)) == 1 }, "a message after the garbage")
}

// rawExchange connects to addr, sends b, closes its writing side, and
// returns what it reads until the other end closes (within 5 s).
func rawExchange(t *testing.T, addr string, b []byte) []byte {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	reply, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("the server did not close the connection: %v", err)
	}
	return reply
}

// TestRefusedPeers: a node with another secret, of another cluster, or that
// means to reach another node is refused at both ends and logged; what it
// sends is dropped and reported unreachable, never delivered.
func TestRefusedPeers(t *testing.T) {
	for _, c := range []struct {
		name           string
		edit           func(*Config)
		as             uint64 // the id node 3 gives node 2
		client, server string // what each logs
	}{
		{"wrong secret", func(c *Config) { c.Secret = []byte("another secret") }, 2,
			"the server's proof does not verify", "authentication failed"},
		{"wrong cluster", func(c *Config) { c.ClusterID = cluster + 1 }, 2,
			"cluster id 8, this node is of cluster 7", "cluster id 8, this node is of cluster 7"},
		{"wrong node", func(*Config) {}, 4,
			"meant to reach node 4, this is node 2", "meant to reach node 4, this is node 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkGoroutines(t)
			b, intruder := startNode(t, 2, ""), startNode(t, 3, "", c.edit)
			intruder.SetPeer(c.as, b.addr)
			waitFor(t, func() bool { return intruder.log.has(c.client) }, "node 3 to log %q; its log:\n%s", c.client, intruder.log)
			waitFor(t, func() bool { return b.log.has(c.server) }, "node 2 to log %q; its log:\n%s", c.server, b.log)
			intruder.Send(c.as, 1, []raftpb.Message{msg(1, nil)})
			waitFor(t, func() bool { return intruder.h.unreachableCount(c.as, 1) == 1 }, "the message reported unreachable")
			if s := intruder.status(c.as); s.Connected || s.Dropped != 1 {
				t.Fatalf("node 3's status: %+v", s)
			}
			if got := b.h.messages(3, 1); len(got) != 0 {
				t.Fatalf("node 2 received %v", got)
			}
		})
	}
}

// TestFrameOverLimit: a frame over the receiver's limit closes that
// connection only: another peer's messages keep arriving, and the sender
// reconnects.
func TestFrameOverLimit(t *testing.T) {
	checkGoroutines(t)
	a := startNode(t, 1, "")
	b := startNode(t, 2, "", func(c *Config) { c.MaxFrameBytes = 64 << 10 })
	c := startNode(t, 3, "")
	connect(t, a, b, c)
	a.Send(2, 1, []raftpb.Message{msg(1, make([]byte, 100<<10))})
	waitFor(t, func() bool { return b.log.has("frame over the size limit") }, "node 2 to log the large frame; its log:\n%s", b.log)
	c.Send(2, 1, []raftpb.Message{msg(2, nil)})
	waitFor(t, func() bool { return len(b.h.messages(3, 1)) == 1 }, "node 3's message")
	sendUntil(t, a, 2, 1, msg(3, nil), func() bool { return len(b.h.messages(1, 1)) > 0 })
	if got := b.h.messages(1, 1)[0]; len(got.Entries[0].Data) != 0 {
		t.Fatalf("node 2 got the large message after all")
	}
}

// TestFrameMemoryGrowsWithBytes: a frame header claiming a large payload
// makes the reader allocate only about what arrived.
func TestFrameMemoryGrowsWithBytes(t *testing.T) {
	hdr := make([]byte, headerSize)
	binary.LittleEndian.PutUint32(hdr, 1<<30)
	r := &frameReader{r: io.MultiReader(bytes.NewReader(hdr), bytes.NewReader(make([]byte, 100<<10))), max: 1 << 30}
	if _, err := r.next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("a frame cut short: %v", err)
	}
	if cap(r.buf) > 256<<10 {
		t.Fatalf("after 100 KiB of a frame claiming 1 GiB, the buffer holds %d bytes", cap(r.buf))
	}
}
