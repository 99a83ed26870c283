package server

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/flintkv/flint/internal/protocol"
)

// Pub/sub, as in Redis 7: a message published on a channel goes at once to
// the connections subscribed to the channel, or to a pattern that matches
// it (a shard channel's, with SPUBLISH, to the subscribers of the shard
// channel), and to the subscribers of the other nodes of a cluster (see
// pubsubfwd.go). Messages never go through the log: like Redis, Flint keeps no
// message, and one published while a subscriber is disconnected is lost
// to it.
//
// A subscriber's messages are queued for its connection's writer (see
// output.deliver); one that lets more than MaxPubSubOutput bytes pile up is
// disconnected, as Redis does past its client-output-buffer-limit for
// pubsub clients. In RESP2 a connection with subscriptions accepts only
// the commands subscribedOK lists; in RESP3 messages arrive as push
// replies among the replies, and every command is accepted.
var pubsubCommands = []*command{
	{name: "subscribe", arity: -2, flags: "pubsub noscript loading stale", run: (*conn).subscribe,
		doc: commandDoc{summary: "Listens for messages published to channels.", since: "2.0.0", group: "pubsub", complexity: "O(N) where N is the number of channels to subscribe to."}},
	{name: "psubscribe", arity: -2, flags: "pubsub noscript loading stale", run: (*conn).psubscribe,
		doc: commandDoc{summary: "Listens for messages published to channels that match one or more patterns.", since: "2.0.0", group: "pubsub", complexity: "O(N) where N is the number of patterns to subscribe to."}},
	{name: "unsubscribe", arity: -1, flags: "pubsub noscript loading stale", run: (*conn).unsubscribe,
		doc: commandDoc{summary: "Stops listening to messages posted to channels.", since: "2.0.0", group: "pubsub", complexity: "O(N) where N is the number of channels to unsubscribe."}},
	{name: "punsubscribe", arity: -1, flags: "pubsub noscript loading stale", run: (*conn).punsubscribe,
		doc: commandDoc{summary: "Stops listening to messages published to channels that match one or more patterns.", since: "2.0.0", group: "pubsub", complexity: "O(N) where N is the number of patterns to unsubscribe."}},
	{name: "publish", arity: 3, flags: "pubsub loading stale fast", run: (*conn).publish,
		doc: commandDoc{summary: "Posts a message to a channel.", since: "2.0.0", group: "pubsub", complexity: "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client)."}},
	{name: "flint.publish", arity: 3, flags: "pubsub loading stale fast", run: (*conn).publishHere,
		doc: commandDoc{summary: "Delivers a message published on another node to this node's subscribers (Flint's own).", since: "0.1.0", group: "pubsub", complexity: "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client)."}},
	// Sharded pub/sub: a shard channel is routed like a key, by its slot.
	{name: "ssubscribe", arity: -2, flags: "pubsub noscript loading stale", first: 1, last: -1, step: 1, run: (*conn).ssubscribe,
		doc: commandDoc{summary: "Listens for messages published to shard channels.", since: "7.0.0", group: "pubsub", complexity: "O(N) where N is the number of shard channels to subscribe to."}},
	{name: "sunsubscribe", arity: -1, flags: "pubsub noscript loading stale", first: 1, last: -1, step: 1, run: (*conn).sunsubscribe,
		doc: commandDoc{summary: "Stops listening to messages posted to shard channels.", since: "7.0.0", group: "pubsub", complexity: "O(N) where N is the number of shard channels to unsubscribe."}},
	{name: "spublish", arity: 3, flags: "pubsub loading stale fast", first: 1, last: 1, step: 1, run: (*conn).spublish,
		doc: commandDoc{summary: "Post a message to a shard channel", since: "7.0.0", group: "pubsub", complexity: "O(N) where N is the number of clients subscribed to the receiving shard channel."}},
	{name: "flint.spublish", arity: 3, flags: "pubsub loading stale fast", run: (*conn).spublishHere,
		doc: commandDoc{summary: "Delivers a message published to a shard channel on another member of the group to this node's subscribers (Flint's own).", since: "0.1.0", group: "pubsub", complexity: "O(N) where N is the number of clients subscribed to the receiving shard channel."}},
	{name: "pubsub", arity: -2, flags: "", subs: pubsubSubcommands,
		doc: commandDoc{summary: "A container for Pub/Sub commands.", since: "2.8.0", group: "pubsub", complexity: "Depends on subcommand."}},
	{name: "reset", arity: 1, flags: "noscript loading stale fast no-auth", run: (*conn).reset,
		doc: commandDoc{summary: "Resets the connection.", since: "6.2.0", group: "connection", complexity: "O(1)"}},
}

// kind is what a subscription is to: a channel or a pattern.
type kind int

const (
	channels kind = iota
	patterns
	shards // shard channels: SSUBSCRIBE's, which SPUBLISH publishes on
	kinds
)

// Reply names of each kind's confirmations.
var (
	subscribeName   = [kinds]string{"subscribe", "psubscribe", "ssubscribe"}
	unsubscribeName = [kinds]string{"unsubscribe", "punsubscribe", "sunsubscribe"}
)

// hub is a server's subscriptions.
type hub struct {
	// mu is held for reading while a message is delivered, and for writing
	// while a connection changes its subscriptions and sends their
	// confirmations: so a message reaches a subscriber after the
	// confirmation of its subscription and before that of its
	// unsubscription, as in Redis.
	mu sync.RWMutex
	// subs[k][name] are the connections subscribed to the channel or
	// pattern name. Invariant: no set is empty, and c is in
	// subs[k][name] exactly when name is in c.subs[k].
	subs [kinds]map[string]map[*conn]struct{}
}

func newHub() *hub {
	h := &hub{}
	for k := range h.subs {
		h.subs[k] = make(map[string]map[*conn]struct{})
	}
	return h
}

// subscriptions are one connection's: its goroutine's, changed under
// hub.mu.
type subscriptions [kinds]map[string]struct{}

// count is the number a (un)subscription to a channel or pattern of kind k
// confirms, as in Redis: the shard channels, or the others.
func (s *subscriptions) count(k kind) int {
	if k == shards {
		return len(s[shards])
	}
	return len(s[channels]) + len(s[patterns])
}

// any reports whether the connection has subscriptions.
func (s *subscriptions) any() bool { return s.count(channels) > 0 || s.count(shards) > 0 }

func (c *conn) subscribe(args [][]byte)    { c.subscribeTo(channels, args[1:]) }
func (c *conn) psubscribe(args [][]byte)   { c.subscribeTo(patterns, args[1:]) }
func (c *conn) unsubscribe(args [][]byte)  { c.unsubscribeFrom(channels, args[1:]) }
func (c *conn) punsubscribe(args [][]byte) { c.unsubscribeFrom(patterns, args[1:]) }
func (c *conn) ssubscribe(args [][]byte)   { c.subscribeTo(shards, args[1:]) }
func (c *conn) sunsubscribe(args [][]byte) { c.unsubscribeFrom(shards, args[1:]) }

// subscribeTo subscribes the connection to names, confirming each with
// the number of subscriptions it then has.
func (c *conn) subscribeTo(k kind, names [][]byte) {
	h := c.srv.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range names {
		name := string(b)
		if c.subs[k] == nil {
			c.subs[k] = make(map[string]struct{})
		}
		if _, ok := c.subs[k][name]; !ok {
			c.subs[k][name] = struct{}{}
			set := h.subs[k][name]
			if set == nil {
				set = make(map[*conn]struct{})
				h.subs[k][name] = set
			}
			set[c] = struct{}{}
		}
		c.confirm(k, subscribeName[k], b)
	}
	c.sendLocked()
}

// unsubscribeFrom unsubscribes the connection from names, or from every
// channel or pattern of the kind if there are none, confirming each with
// the number of subscriptions left. Those without names are confirmed in
// byte order (Redis's order is its hash table's).
func (c *conn) unsubscribeFrom(k kind, names [][]byte) {
	h := c.srv.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(names) == 0 {
		for _, name := range slices.Sorted(maps.Keys(c.subs[k])) {
			names = append(names, []byte(name))
		}
		if len(names) == 0 {
			c.confirm(k, unsubscribeName[k], nil)
		}
	}
	for _, b := range names {
		c.dropLocked(k, string(b))
		c.confirm(k, unsubscribeName[k], b)
	}
	c.sendLocked()
}

// dropLocked removes the connection's subscription to name, if it has one.
func (c *conn) dropLocked(k kind, name string) {
	if _, ok := c.subs[k][name]; !ok {
		return
	}
	delete(c.subs[k], name)
	set := c.srv.hub.subs[k][name]
	delete(set, c)
	if len(set) == 0 {
		delete(c.srv.hub.subs[k], name)
	}
}

// leavePubSub drops every subscription of a connection that closes or
// resets.
func (c *conn) leavePubSub() {
	if !c.subs.any() {
		return
	}
	h := c.srv.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range kinds {
		for name := range c.subs[k] {
			c.dropLocked(k, name)
		}
	}
}

// confirm appends a (un)subscription's confirmation: a push in RESP3, an
// array in RESP2, of the reply's name, the channel or pattern (null for an
// UNSUBSCRIBE with none to drop: name nil, not empty) and the
// subscriptions left.
func (c *conn) confirm(k kind, what string, name []byte) {
	c.out = protocol.AppendPush(c.out, 3, c.proto)
	c.bulkString(what)
	if name == nil {
		c.null()
	} else {
		c.out = protocol.AppendBulk(c.out, name)
	}
	c.int(int64(c.subs.count(k)))
}

// sendLocked sends the replies so far, under hub.mu, so that no message is
// delivered out of their order. It first publishes the connection's
// subscription counts, so that once a client has a confirmation, CLIENT
// LIST on any connection shows the subscriptions it reports.
func (c *conn) sendLocked() {
	for k := range c.info.subs {
		c.info.subs[k].Store(int32(len(c.subs[k])))
	}
	if c.send(c.out) != nil {
		c.quit = true
	}
	c.out = c.out[:0]
}

// publish is PUBLISH channel message. It replies with the number of
// subscriptions on this node that the message reached, as Redis Cluster
// does, and forwards it to the other nodes (see pubsubfwd.go).
func (c *conn) publish(args [][]byte) {
	c.publishHere(args)
	c.srv.forwardPublish("FLINT.PUBLISH", args[1], args[2])
}

// publishHere is FLINT.PUBLISH channel message, which another node
// forwards a message with: PUBLISH to this node's subscribers only.
func (c *conn) publishHere(args [][]byte) {
	c.int(int64(c.srv.hub.publish(c, channels, args[1], args[2])))
}

// spublish is SPUBLISH shardchannel message: PUBLISH to the subscribers of
// the shard channel, which a cluster routes to the group of its slot; the
// other members of the group get it too, as a Redis shard's replicas do.
func (c *conn) spublish(args [][]byte) {
	c.spublishHere(args)
	c.srv.forwardPublish("FLINT.SPUBLISH", args[1], args[2])
}

// spublishHere is FLINT.SPUBLISH, SPUBLISH to this node's subscribers only.
func (c *conn) spublishHere(args [][]byte) {
	c.int(int64(c.srv.hub.publish(c, shards, args[1], args[2])))
}

// publish delivers a message to this node's subscribers of the channel or
// shard channel (k) and, for a channel, of the patterns that match it, and
// returns to how many subscriptions. from is the publishing connection: if
// it is a subscriber its message goes after the replies before PUBLISH's,
// as in Redis.
func (h *hub) publish(from *conn, k kind, channel, msg []byte) int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	n := 0
	what := "message"
	if k == shards {
		what = "smessage"
	}
	var enc [2][]byte // the message in RESP2 and RESP3, made on first need
	for sub := range h.subs[k][string(channel)] {
		v := sub.proto - protocol.RESP2
		if enc[v] == nil {
			enc[v] = appendMessage(nil, sub.proto, what, nil, channel, msg)
		}
		sub.receive(from, enc[v])
		n++
	}
	if k == shards {
		return n
	}
	for pattern, subs := range h.subs[patterns] {
		if !globMatch([]byte(pattern), channel) {
			continue
		}
		enc = [2][]byte{}
		for sub := range subs {
			v := sub.proto - protocol.RESP2
			if enc[v] == nil {
				enc[v] = appendMessage(nil, sub.proto, "pmessage", []byte(pattern), channel, msg)
			}
			sub.receive(from, enc[v])
			n++
		}
	}
	return n
}

// appendMessage appends a message as a subscriber receives it: what
// (message or smessage) channel payload, or pmessage pattern channel
// payload when pattern is set.
func appendMessage(b []byte, v protocol.Version, what string, pattern, channel, msg []byte) []byte {
	if pattern == nil {
		b = protocol.AppendPush(b, 3, v)
	} else {
		b = protocol.AppendPush(b, 4, v)
	}
	b = protocol.AppendBulkString(b, what)
	if pattern != nil {
		b = protocol.AppendBulk(b, pattern)
	}
	b = protocol.AppendBulk(b, channel)
	return protocol.AppendBulk(b, msg)
}

// receive queues a message for the subscriber c, which from published.
func (c *conn) receive(from *conn, msg []byte) {
	if c == from {
		c.out = append(c.out, msg...)
		return
	}
	c.output.deliver(c, msg, c.srv.cfg.MaxPubSubOutput)
}

// subscribedOK reports whether a RESP2 connection with subscriptions may
// run the command: Redis allows only these.
func subscribedOK(name string) bool {
	switch name {
	case "subscribe", "psubscribe", "ssubscribe", "unsubscribe", "punsubscribe", "sunsubscribe", "ping", "quit", "reset":
		return true
	}
	return false
}

// inSubscribedContext reports whether the connection is in RESP2's
// subscribed context, where only subscribedOK's commands run.
func (c *conn) inSubscribedContext() bool {
	return c.proto == protocol.RESP2 && c.subs.any()
}

// errSubscribed refuses a command in the subscribed context with Redis's
// error, which names a subcommand as container|sub (exec has already
// resolved those in the command table; CLUSTER's are not in it).
func (c *conn) errSubscribed(cmd *command, args [][]byte) {
	name := cmd.name
	if name == "cluster" && len(args) > 1 {
		name += "|" + strings.ToLower(string(args[1]))
	}
	c.err(fmt.Sprintf("ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context", name))
}

// PUBSUB's subcommands answer about this node's subscriptions.
// (SHARD)CHANNELS list in byte order (Redis's order is its hash table's).
var pubsubSubcommands = []*command{
	{name: "pubsub|channels", arity: -2, flags: "pubsub loading stale", run: func(c *conn, args [][]byte) { c.listChannels(channels, args) },
		doc: commandDoc{summary: "Returns the active channels.", since: "2.8.0", complexity: "O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)"}},
	{name: "pubsub|numpat", arity: 2, flags: "pubsub loading stale", run: func(c *conn, args [][]byte) { c.int(int64(c.srv.hub.count(patterns))) },
		doc: commandDoc{summary: "Returns a count of unique pattern subscriptions.", since: "2.8.0", complexity: "O(1)"}},
	{name: "pubsub|numsub", arity: -2, flags: "pubsub loading stale", run: func(c *conn, args [][]byte) { c.numsub(channels, args[2:]) },
		doc: commandDoc{summary: "Returns a count of subscribers to channels.", since: "2.8.0", complexity: "O(N) for the NUMSUB subcommand, where N is the number of requested channels"}},
	{name: "pubsub|shardchannels", arity: -2, flags: "pubsub loading stale", run: func(c *conn, args [][]byte) { c.listChannels(shards, args) },
		doc: commandDoc{summary: "Returns the active shard channels.", since: "7.0.0", complexity: "O(N) where N is the number of active shard channels, and assuming constant time pattern matching (relatively short shard channels)."}},
	{name: "pubsub|shardnumsub", arity: -2, flags: "pubsub loading stale", run: func(c *conn, args [][]byte) { c.numsub(shards, args[2:]) },
		doc: commandDoc{summary: "Returns the count of subscribers of shard channels.", since: "7.0.0", complexity: "O(N) for the SHARDNUMSUB subcommand, where N is the number of requested shard channels"}},
	{name: "pubsub|help", arity: 2, flags: "loading stale", run: func(c *conn, args [][]byte) { c.pubsubHelp() },
		doc: commandDoc{summary: "Returns helpful text about the different subcommands.", since: "6.2.0", complexity: "O(1)"}},
}

// count returns how many channels or patterns have subscribers.
func (h *hub) count(k kind) int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.subs[k])
}

// listChannels is PUBSUB (SHARD)CHANNELS [pattern]; args include the
// container's name and the subcommand's.
func (c *conn) listChannels(k kind, args [][]byte) {
	if len(args) > 3 {
		c.err(fmt.Sprintf("ERR unknown subcommand or wrong number of arguments for '%s'. Try PUBSUB HELP.", truncate(args[1])))
		return
	}
	pattern := args[2:]
	h := c.srv.hub
	h.mu.RLock()
	var names []string
	for name := range h.subs[k] {
		if len(pattern) == 0 || globMatch(pattern[0], []byte(name)) {
			names = append(names, name)
		}
	}
	h.mu.RUnlock()
	slices.Sort(names)
	c.out = protocol.AppendArray(c.out, len(names))
	for _, name := range names {
		c.bulkString(name)
	}
}

// numsub replies with each channel or shard channel and its number of
// subscribers on this node, in a flat array in RESP3 too (as Redis 7.0).
func (c *conn) numsub(k kind, names [][]byte) {
	h := c.srv.hub
	c.out = protocol.AppendArray(c.out, 2*len(names))
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, name := range names {
		c.out = protocol.AppendBulk(c.out, name)
		c.int(int64(len(h.subs[k][string(name)])))
	}
}

// pubsubHelp is Redis 7.0's PUBSUB HELP, whose lines differ from other
// HELPs' (it ends "Prints this help."), so it is not c.help's.
func (c *conn) pubsubHelp() {
	lines := []string{
		"PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"CHANNELS [<pattern>]",
		"    Return the currently active channels matching a <pattern> (default: '*').",
		"NUMPAT",
		"    Return number of subscriptions to patterns.",
		"NUMSUB [<channel> ...]",
		"    Return the number of subscribers for the specified channels, excluding",
		"    pattern subscriptions(default: no channels).",
		"SHARDCHANNELS [<pattern>]",
		"    Return the currently active shard level channels matching a <pattern> (default: '*').",
		"SHARDNUMSUB [<shardchannel> ...]",
		"    Return the number of subscribers for the specified shard level channel(s)",
		"HELP",
		"    Prints this help.",
	}
	c.out = protocol.AppendArray(c.out, len(lines))
	for _, l := range lines {
		c.out = protocol.AppendSimple(c.out, l)
	}
}

// setProto changes the connection's protocol, under hub.mu if it has
// subscriptions: publishers read it to encode its messages.
func (c *conn) setProto(v protocol.Version) {
	if !c.subs.any() {
		c.proto = v
		return
	}
	c.srv.hub.mu.Lock()
	c.proto = v
	c.srv.hub.mu.Unlock()
}

// reset is RESET: the connection goes back to its state when it
// connected, as Redis's does: no subscriptions, RESP2, no name, not
// READONLY, and logged out if a password is required.
func (c *conn) reset([][]byte) {
	c.leavePubSub()
	c.proto = protocol.RESP2
	c.readonly = false
	c.info.name.Store(nil)
	if c.srv.cfg.RequirePass != "" && c.authed {
		c.authed = false
		c.parser.SetLimits(c.srv.lim.ForUnauthenticated())
	}
	c.out = protocol.AppendSimple(c.out, "RESET")
}
