package client

import (
	"context"
	"slices"
	"time"
)

// refreshInterval is the least time between the starts of two refreshes
// of the map: a burst of MOVED replies, or of failures, costs one
// CLUSTER SLOTS, and then at most one more per interval while it lasts.
const refreshInterval = 100 * time.Millisecond

// refresh asks for the map to be learned again, in the background: at
// once if no refresh ran in the last refreshInterval, else once the
// interval is over. Calls do not wait for it.
func (c *Client) refresh() {
	select {
	case c.kick <- struct{}{}:
	default: // a refresh is asked for already
	}
}

// refreshLoop is the goroutine that refreshes the map when asked, until
// Close.
func (c *Client) refreshLoop() {
	for {
		select {
		case <-c.kick:
		case <-c.ctx.Done():
			return
		}
		c.rediscover()
		t := time.NewTimer(refreshInterval)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			return
		}
	}
}

// rediscover asks the members for CLUSTER SLOTS, those the Client is
// connected to first (a member that just failed is likely not to answer),
// until one answers. An answer that is not a map, such as an error from a
// server without the command, leaves the routes as they are.
func (c *Client) rediscover() {
	c.mu.Lock()
	ps := slices.Clone(c.mu.members)
	c.mu.Unlock()
	slices.SortStableFunc(ps, func(a, b *pool) int {
		switch ha, hb := a.connected(), b.connected(); {
		case ha && !hb:
			return -1
		case hb && !ha:
			return 1
		}
		return 0
	})
	for _, p := range ps {
		if c.discover(p) {
			return
		}
	}
}

// discover asks p's member for CLUSTER SLOTS and learns the routes and
// members it names. It reports whether the member answered: false if it
// could not be reached. A server without the command, or a reply that is
// not a map, leaves the routes as they are: calls then go to the target
// and, if it fails, to the other members.
func (c *Client) discover(p *pool) bool {
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.dialTimeout)
	defer cancel()
	replies, err := p.send(ctx, appendArgs(nil, "CLUSTER", "SLOTS"), 1)
	if err != nil {
		return false
	}
	if r, addrs, ok := parseSlots(replies[0], p.addr); ok {
		c.learn(r, addrs)
	}
	return true
}
