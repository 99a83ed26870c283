package transporttest

import (
	"errors"
	"io"
	"sync/atomic"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/flintkv/flint/internal/transport"
)

// ErrDown is ReceiveSnapshot's error at a Switch that has no handler.
var ErrDown = errors.New("transporttest: the node is down")

// Switch is a node's transport.Handler across restarts of what handles
// its messages (a replica, say): it hands each call to the handler set
// last, and drops what arrives while none is, as a real network drops
// what reaches a node that is down. Register the Switch, not the handler,
// with the Network. Its methods are safe for concurrent use.
type Switch struct {
	h atomic.Pointer[transport.Handler]
}

var _ transport.Handler = (*Switch)(nil)

// Set makes h the handler of the calls from now on; nil drops them.
func (s *Switch) Set(h transport.Handler) {
	if h == nil {
		s.h.Store(nil)
		return
	}
	s.h.Store(&h)
}

func (s *Switch) handler() transport.Handler {
	if p := s.h.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *Switch) Receive(from, group uint64, msgs []raftpb.Message) {
	if h := s.handler(); h != nil {
		h.Receive(from, group, msgs)
	}
}

func (s *Switch) ReceiveSnapshot(from, group uint64, m raftpb.Message, body io.Reader) error {
	if h := s.handler(); h != nil {
		return h.ReceiveSnapshot(from, group, m, body)
	}
	return ErrDown
}

func (s *Switch) Unreachable(to, group uint64) {
	if h := s.handler(); h != nil {
		h.Unreachable(to, group)
	}
}

func (s *Switch) SnapshotDone(to, group uint64, err error) {
	if h := s.handler(); h != nil {
		h.SnapshotDone(to, group, err)
	}
}
