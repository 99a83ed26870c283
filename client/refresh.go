package client

import (
	"bytes"
	"context"
	"slices"
	"strconv"
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

// discover asks p's member for its map (askMap) and learns the routes
// and members it names, unless the Client holds a later map. It reports
// whether the member answered: false if it could not be reached. A server
// without the command, or a reply that is not a map, leaves the routes as
// they are: calls then go to the target and, if it fails, to the other
// members.
func (c *Client) discover(p *pool) bool {
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.dialTimeout)
	defer cancel()
	r, addrs, epoch, ok, err := askMap(ctx, p)
	if err != nil {
		return false
	}
	if ok {
		c.learn(r, addrs, epoch)
	}
	return true
}

// askMap asks p's member for CLUSTER INFO and CLUSTER SLOTS, in one
// round trip, and returns the routes and addresses CLUSTER SLOTS names
// (ok false if it is not a map) and the map's epoch: CLUSTER INFO's
// cluster_current_epoch, which Flint sets to its cluster map's epoch, 0 if
// the member gives none. INFO goes first, so that a map that changes
// between the two is of that epoch or a later one: the epoch never
// overstates the routes' map. err is set if the member did not answer.
func askMap(ctx context.Context, p *pool) (r routes, addrs []string, epoch uint64, ok bool, err error) {
	replies, err := p.send(ctx, appendArgs(appendArgs(nil, "CLUSTER", "INFO"), "CLUSTER", "SLOTS"), 2)
	if err != nil {
		return nil, nil, 0, false, err
	}
	r, addrs, ok = parseSlots(replies[1], p.addr)
	return r, addrs, parseEpoch(replies[0]), ok, nil
}

// parseEpoch returns the cluster_current_epoch of a CLUSTER INFO reply, 0
// if it has none.
func parseEpoch(v Value) uint64 {
	const field = "cluster_current_epoch:"
	if v.Kind != KindBulk && v.Kind != KindVerbat {
		return 0
	}
	_, rest, found := bytes.Cut(v.Str, []byte(field))
	if !found {
		return 0
	}
	if end := bytes.IndexAny(rest, "\r\n"); end >= 0 {
		rest = rest[:end]
	}
	n, _ := strconv.ParseUint(string(rest), 10, 64)
	return n
}
