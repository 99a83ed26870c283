package transport

import (
	"context"
	"sync"
)

// route names the messages of one group for one node.
type route struct{ to, group uint64 }

// notifier reports dropped messages to Handler.Unreachable from a goroutine
// of its own, so that Send never calls the handler, and once for all the
// drops of a route that happen before the handler hears of the first.
type notifier struct {
	wake chan struct{} // holds a token while mu.routes is not empty
	mu   struct {
		sync.Mutex
		routes map[route]struct{}
	}
}

func newNotifier() *notifier {
	n := &notifier{wake: make(chan struct{}, 1)}
	n.mu.routes = make(map[route]struct{})
	return n
}

// add records that messages of group for node to were dropped.
func (n *notifier) add(to, group uint64) {
	n.mu.Lock()
	n.mu.routes[route{to, group}] = struct{}{}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// run reports the routes added until ctx ends.
func (n *notifier) run(ctx context.Context, h Handler) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.wake:
		}
		n.mu.Lock()
		routes := n.mu.routes
		n.mu.routes = make(map[route]struct{})
		n.mu.Unlock()
		for r := range routes {
			h.Unreachable(r.to, r.group)
		}
	}
}
