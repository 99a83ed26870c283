package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// snapshotChunk is the size of a snapshot stream's chunks (at most
// MaxFrameBytes).
const snapshotChunk = 1 << 20

// A snapshot stream fails when one of its frames takes stallTimeout to
// write or to arrive, or when its receiver gives no status statusTimeout
// after the end marker (it may be writing and syncing a large file); so
// that a peer that hangs never holds up a raft group's snapshot for ever.
// A sender whose stream broke waits statusAfterFailure for the receiver's
// status, which says why more usefully than the broken write.
const (
	stallTimeout       = 30 * time.Second
	statusTimeout      = 5 * time.Minute
	statusAfterFailure = time.Second
)

// SendSnapshot streams body, size bytes, to node to on a connection of its
// own: a begin frame holding m, chunks of body, and an end marker with the
// total length. The receiver's answer, or what broke the stream, goes to
// Handler.SnapshotDone. It never blocks: at most MaxSnapshots streams are
// sent at once, and the others wait their turn on goroutines of their own.
// The write of a stream blocks only its goroutine (TCP's flow control).
func (t *Transport) SendSnapshot(to, group uint64, m raftpb.Message, body io.ReadCloser, size int64) {
	started := t.spawn(func() {
		err := t.sendSnapshot(to, group, m, body, size)
		body.Close()
		if err != nil {
			err = fmt.Errorf("snapshot of group %d for node %d: %w", group, to, err)
		}
		t.cfg.Handler.SnapshotDone(to, group, err)
	})
	if !started {
		body.Close()
	}
}

// sendSnapshot waits for a slot, connects, streams and waits for the
// receiver's status.
func (t *Transport) sendSnapshot(to, group uint64, m raftpb.Message, body io.Reader, size int64) error {
	select {
	case t.sendSnaps <- struct{}{}:
		defer func() { <-t.sendSnaps }()
	case <-t.ctx.Done():
		return ErrClosed
	}
	addr, ok := t.peerAddr(to)
	if !ok {
		return ErrUnknownPeer
	}
	c, r, err := t.dial(t.ctx, addr, to, kindSnapshot)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := t.closeWithTransport(c)
	defer stop()
	err = t.stream(streamWriter{c}, group, m, body, size)
	if errors.Is(err, errStreamWrite) {
		c.SetReadDeadline(time.Now().Add(statusAfterFailure))
		if st := readStatus(r); errors.Is(st, ErrRefused) {
			return st
		}
	}
	if err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(statusTimeout))
	return readStatus(r)
}

// streamWriter writes a snapshot stream, each write within stallTimeout,
// and marks its errors, after which the receiver may have said why it
// stopped reading.
type streamWriter struct{ c net.Conn }

func (s streamWriter) Write(p []byte) (int, error) {
	s.c.SetWriteDeadline(time.Now().Add(stallTimeout))
	n, err := s.c.Write(p)
	if err != nil {
		err = fmt.Errorf("%w: %w", errStreamWrite, err)
	}
	return n, err
}

// stream writes the snapshot's frames to w.
func (t *Transport) stream(w io.Writer, group uint64, m raftpb.Message, body io.Reader, size int64) error {
	mb, err := m.Marshal()
	if err != nil {
		return fmt.Errorf("%w: MsgSnap: %v", ErrMalformed, err)
	}
	if _, err := w.Write(appendFrame(nil, typeSnapBegin, group, mb)); err != nil {
		return err
	}
	buf := make([]byte, headerSize+min(snapshotChunk, t.cfg.MaxFrameBytes))
	body = io.LimitReader(body, size+1) // enough to find a body longer than size
	total := int64(0)
	for {
		n, err := io.ReadFull(body, buf[headerSize:])
		if n > 0 {
			f, start := beginFrame(buf[:0], typeSnapChunk, group)
			if _, err := w.Write(finishFrame(f[:headerSize+n], start)); err != nil {
				return err
			}
			total += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return fmt.Errorf("transport: reading the snapshot: %w", err)
		}
	}
	if total != size {
		return fmt.Errorf("%w: %d bytes or more, declared %d", ErrSnapshotSize, total, size)
	}
	_, err = w.Write(appendFrame(nil, typeSnapEnd, group, binary.LittleEndian.AppendUint64(nil, uint64(total))))
	return err
}

// readStatus reads the receiver's status frame: nil if empty, else its
// text in an error wrapping ErrRefused.
func readStatus(r *frameReader) error {
	f, err := r.next()
	switch {
	case err != nil:
		return fmt.Errorf("transport: waiting for the snapshot's receiver: %w", err)
	case f.typ != typeStatus:
		return fmt.Errorf("%w: frame of type %d instead of a status", ErrMalformed, f.typ)
	case len(f.payload) > 0:
		return fmt.Errorf("%w: %s", ErrRefused, statusText(f.payload))
	}
	return nil
}

// receiveSnapshot reads one snapshot stream from node from on c and hands
// it to the handler, then sends its status back.
func (t *Transport) receiveSnapshot(c net.Conn, r *frameReader, from uint64) {
	c.SetReadDeadline(time.Now().Add(stallTimeout))
	group, m, err := readBegin(r)
	if err == nil {
		err = t.handSnapshot(c, from, group, m, r)
	}
	if err != nil && t.ctx.Err() == nil {
		t.log.Warn("snapshot from peer failed", "peer", from, "group", group, "err", err)
	}
	var status []byte
	if err != nil {
		status = []byte(err.Error())
	}
	c.SetWriteDeadline(time.Now().Add(stallTimeout))
	c.Write(appendFrame(nil, typeStatus, group, status))
}

// handSnapshot passes the stream to the handler if a slot is free.
func (t *Transport) handSnapshot(c net.Conn, from, group uint64, m raftpb.Message, r *frameReader) error {
	select {
	case t.recvSnaps <- struct{}{}:
		defer func() { <-t.recvSnaps }()
	default:
		return fmt.Errorf("%w: %d at once", ErrTooManySnapshots, t.cfg.MaxSnapshots)
	}
	b := &snapshotBody{r: r, conn: c, group: group}
	err := t.cfg.Handler.ReceiveSnapshot(from, group, m, b)
	if err == nil && b.err != io.EOF {
		err = errUnread
	}
	return err
}

// readBegin reads the frame that starts a snapshot stream.
func readBegin(r *frameReader) (group uint64, m raftpb.Message, err error) {
	f, err := r.next()
	if err == nil && f.typ != typeSnapBegin {
		err = fmt.Errorf("%w: frame of type %d to begin a snapshot", ErrMalformed, f.typ)
	}
	if err != nil {
		return 0, m, err
	}
	if err := m.Unmarshal(f.payload); err != nil {
		return f.group, m, fmt.Errorf("%w: MsgSnap: %v", ErrMalformed, err)
	}
	return f.group, m, nil
}
