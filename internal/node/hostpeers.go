package node

import (
	"sync"

	"github.com/flintkv/flint/internal/transport"
)

// learnedNodes are the nodes a hosting node learned from its groups'
// rosters since it started: members added to a group it hosts, on nodes
// its --host-nodes may not name (they joined since). It may start a new
// group with them (StartGroup), as with the nodes of its flags.
type learnedNodes struct {
	mu  sync.Mutex
	ids map[uint64]bool
}

// learnPeer points t at the peer address of node, a member of one of the
// groups this node (self) hosts, from info, the "client@peer" it was
// added with (FLINT.MEMBER ADD), which every member of the group learns
// from the change's entry (see package hostgroup): so each node reaches
// a member added since it started, whichever node added it, and a node
// that joined reaches those added before it. It records node in l.
func (l *learnedNodes) learnPeer(t *transport.Transport, self, node uint64, info []byte) {
	if _, peer := parseInfo(info); node != self && peer != "" {
		t.SetPeer(node, peer)
		l.add(node)
	}
}

// add records node in l.
func (l *learnedNodes) add(node uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ids == nil {
		l.ids = map[uint64]bool{}
	}
	l.ids[node] = true
}

// has reports whether l learned node.
func (l *learnedNodes) has(node uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ids[node]
}
