package node

import (
	"github.com/flintkv/flint/internal/transport"
)

// learnPeer points t at the peer address of node, a member of one of the
// groups this node (self) hosts, from info, the "client@peer" it was
// added with (FLINT.MEMBER ADD), which every member of the group learns
// from the change's entry (see package hostgroup): so each node reaches
// a member added since it started, whichever node added it, and a node
// that joined reaches those added before it.
func learnPeer(t *transport.Transport, self, node uint64, info []byte) {
	if _, peer := parseInfo(info); node != self && peer != "" {
		t.SetPeer(node, peer)
	}
}
