package transport

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// snapMsg is the MsgSnap the tests send.
func snapMsg() raftpb.Message {
	return raftpb.Message{Type: raftpb.MsgSnap, To: 2, From: 1, Term: 4, Snapshot: &raftpb.Snapshot{
		Data:     []byte("metadata"),
		Metadata: raftpb.SnapshotMetadata{Index: 100, Term: 4, ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}}},
	}}
}

// snapBody returns n seeded random bytes.
func snapBody(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{1})
	r.Read(b)
	return b
}

// keepSnapshot makes n's handler read each snapshot whole and send the
// outcome (its bytes' hash, or the read error) to the returned channel.
func keepSnapshot(n *node) <-chan error {
	out := make(chan error, 4)
	n.h.snapshot = func(from, group uint64, m raftpb.Message, body io.Reader) error {
		h := sha256.New()
		_, err := io.Copy(h, body)
		if err == nil && (m.Snapshot.Metadata.Index != 100 || string(m.Snapshot.Data) != "metadata") {
			err = errors.New("the MsgSnap changed on the way")
		}
		if err == nil && !bytes.Equal(h.Sum(nil), wantHash) {
			err = errors.New("the snapshot's bytes changed on the way")
		}
		out <- err
		return err
	}
	return out
}

// wantHash is the SHA-256 of the tests' snapshot body.
var wantHash = func() []byte { h := sha256.Sum256(snapBody(3<<20 + 12345)); return h[:] }()

// TestSnapshot streams a few MiB: the receiver reads the bytes sent, and the
// sender hears it went well.
func TestSnapshot(t *testing.T) {
	checkGoroutines(t)
	a, b := startNode(t, 1, ""), startNode(t, 2, "")
	connect(t, a, b)
	got := keepSnapshot(b)
	body := snapBody(3<<20 + 12345)
	a.SendSnapshot(2, 8, snapMsg(), io.NopCloser(bytes.NewReader(body)), int64(len(body)))
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if d := <-a.h.done; d != (snapDone{2, 8, nil}) {
		t.Fatalf("SnapshotDone: %+v", d)
	}
}

// TestSnapshotCorruptChunk: a byte flipped on the way, inside a chunk, makes
// the receiver's Read fail with ErrCorrupt, and the sender hears of it.
func TestSnapshotCorruptChunk(t *testing.T) {
	checkGoroutines(t)
	a, b := startNode(t, 1, ""), startNode(t, 2, "")
	p := startFlipper(t, b.addr, 2<<20)
	a.SetPeer(2, p.addr)
	got := keepSnapshot(b)
	body := snapBody(3<<20 + 12345)
	a.SendSnapshot(2, 8, snapMsg(), io.NopCloser(bytes.NewReader(body)), int64(len(body)))
	if err := <-got; !errors.Is(err, ErrCorrupt) {
		t.Fatalf("the receiver read %v, want ErrCorrupt", err)
	}
	if d := <-a.h.done; d.err == nil {
		t.Fatalf("SnapshotDone of a corrupt stream: %+v", d)
	}
}

// TestSnapshotRefused: the receiver's error reaches the sender; a body
// shorter than declared fails at both ends; so does a node without address.
func TestSnapshotRefused(t *testing.T) {
	checkGoroutines(t)
	a, b := startNode(t, 1, ""), startNode(t, 2, "")
	connect(t, a, b)
	b.h.snapshot = func(from, group uint64, m raftpb.Message, body io.Reader) error {
		if _, err := io.Copy(io.Discard, body); err != nil {
			return err
		}
		return errors.New("disk full")
	}
	a.SendSnapshot(2, 8, snapMsg(), io.NopCloser(bytes.NewReader(make([]byte, 10))), 10)
	if d := <-a.h.done; !errors.Is(d.err, ErrRefused) || !bytes.Contains([]byte(d.err.Error()), []byte("disk full")) {
		t.Fatalf("SnapshotDone of a refused snapshot: %v", d.err)
	}

	got := keepSnapshot(b)
	a.SendSnapshot(2, 8, snapMsg(), io.NopCloser(bytes.NewReader(make([]byte, 10))), 11)
	if d := <-a.h.done; !errors.Is(d.err, ErrSnapshotSize) {
		t.Fatalf("SnapshotDone of a short body: %v", d.err)
	}
	if err := <-got; !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("the receiver of a stream without end read %v", err)
	}

	a.SendSnapshot(5, 8, snapMsg(), io.NopCloser(bytes.NewReader(nil)), 0)
	if d := <-a.h.done; !errors.Is(d.err, ErrUnknownPeer) {
		t.Fatalf("SnapshotDone for an unknown node: %v", d.err)
	}

	b.h.snapshot = func(uint64, uint64, raftpb.Message, io.Reader) error { return nil }
	a.SendSnapshot(2, 8, snapMsg(), io.NopCloser(bytes.NewReader(make([]byte, 10))), 10)
	if d := <-a.h.done; !errors.Is(d.err, ErrRefused) || !bytes.Contains([]byte(d.err.Error()), []byte(errUnread.Error())) {
		t.Fatalf("SnapshotDone of a snapshot not read: %v", d.err)
	}
}

// TestSnapshotsBounded: a receiver takes MaxSnapshots streams at once and
// refuses more.
func TestSnapshotsBounded(t *testing.T) {
	checkGoroutines(t)
	a := startNode(t, 1, "")
	b := startNode(t, 2, "", func(c *Config) { c.MaxSnapshots = 1 })
	connect(t, a, b)
	started, release := make(chan struct{}), make(chan struct{})
	b.h.snapshot = func(from, group uint64, m raftpb.Message, body io.Reader) error {
		close(started)
		<-release
		_, err := io.Copy(io.Discard, body)
		return err
	}
	a.SendSnapshot(2, 1, snapMsg(), io.NopCloser(bytes.NewReader(nil)), 0)
	<-started
	a.SendSnapshot(2, 2, snapMsg(), io.NopCloser(bytes.NewReader(nil)), 0)
	if d := <-a.h.done; d.group != 2 || !errors.Is(d.err, ErrRefused) || !bytes.Contains([]byte(d.err.Error()), []byte(ErrTooManySnapshots.Error())) {
		t.Fatalf("the second snapshot: %+v", d)
	}
	close(release)
	if d := <-a.h.done; d != (snapDone{2, 1, nil}) {
		t.Fatalf("the first snapshot: %+v", d)
	}
}

// flipper is a TCP proxy that flips one byte of what each connection sends,
// at offset at from its start.
type flipper struct {
	addr string
	wg   sync.WaitGroup
}

// startFlipper starts a flipper to target, stopped when the test ends.
func startFlipper(t *testing.T, target string, at int64) *flipper {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &flipper{addr: l.Addr().String()}
	var mu sync.Mutex
	var conns []net.Conn
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			f.wg.Add(2)
			go f.pipe(s, c, at)
			go f.pipe(c, s, -1)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		f.wg.Wait()
	})
	return f
}

// pipe copies src to dst, flipping the byte at offset at, until either
// fails; then it closes both.
func (f *flipper) pipe(dst, src net.Conn, at int64) {
	defer f.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for off := int64(0); ; {
		n, err := src.Read(buf)
		if at >= off && at < off+int64(n) {
			buf[at-off] ^= 0x40
		}
		off += int64(n)
		if _, werr := dst.Write(buf[:n]); werr != nil || err != nil {
			return
		}
	}
}
