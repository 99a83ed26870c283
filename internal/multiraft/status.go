package multiraft

import (
	"fmt"

	"go.etcd.io/raft/v3"
)

// errLeadershipLost answers the proposals waiting at a leader that stepped
// down: a new leader may still commit their entries, or overwrite them.
var errLeadershipLost = fmt.Errorf("%w: leadership was lost", ErrUnknownState)

// Status returns raft's status of this node's member of group id: its
// term, commit and applied indexes, and, at a leader, each member's
// progress.
func (h *Host) Status(id uint64) (raft.Status, error) {
	g := h.group(id)
	if g == nil {
		return raft.Status{}, ErrNoGroup
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rn.Status(), nil
}

// Done is closed once the host stops, by Stop or a failure of its log
// (see Err).
func (h *Host) Done() <-chan struct{} { return h.stop }
