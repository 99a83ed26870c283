package server_test

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
	"github.com/flintkv/flint/internal/shardmap"
	"github.com/flintkv/flint/internal/slot"
	"github.com/flintkv/flint/internal/store"
)

// step is one step of a pub/sub script: connection conn sends send, then
// reads exactly want (byte for byte).
type step struct {
	conn       int
	send, want string
}

// runScript runs steps over n connections to addr.
func runScript(t *testing.T, addr string, n int, steps []step) {
	t.Helper()
	conns := make([]*rawConn, n)
	for i := range conns {
		conns[i] = dialRaw(t, addr)
	}
	runScriptOn(t, conns, steps)
}

// The replies in these scripts are redis-server 7.0.15's, byte for byte,
// but for the order in which UNSUBSCRIBE without arguments confirms, and
// PUBSUB CHANNELS lists, several channels: Redis's is its hash table's,
// Flint's byte order. Each script has at most one such reply of several.

// TestPubSubRESP2 checks subscriptions, messages and the subscribed
// context of RESP2.
func TestPubSubRESP2(t *testing.T) {
	srv := start(t, server.Config{})
	sub, pub := 0, 1
	runScript(t, srv.Addr, 2, []step{
		{sub, "SUBSCRIBE news\r\n", "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n"},
		{sub, "PSUBSCRIBE n* x?\r\n", "*3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:2\r\n*3\r\n$10\r\npsubscribe\r\n$2\r\nx?\r\n:3\r\n"},
		{pub, "PUBLISH news hello\r\n", ":2\r\n"},
		{sub, "", "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$5\r\nhello\r\n"},
		{pub, "PUBLISH nope 1\r\n", ":1\r\n"},
		{sub, "", "*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnope\r\n$1\r\n1\r\n"},
		{pub, "PUBLISH other 1\r\n", ":0\r\n"},
		{pub, "PUBSUB CHANNELS\r\nPUBSUB CHANNELS x*\r\nPUBSUB NUMSUB news foo\r\nPUBSUB NUMPAT\r\n",
			"*1\r\n$4\r\nnews\r\n*0\r\n*4\r\n$4\r\nnews\r\n:1\r\n$3\r\nfoo\r\n:0\r\n:2\r\n"},
		{pub, "PUBSUB SHARDCHANNELS\r\nPUBSUB SHARDNUMSUB x\r\nPUBSUB FOO\r\nPUBSUB\r\nPUBLISH a\r\nPUBSUB NUMPAT x\r\nPUBSUB CHANNELS a b\r\n",
			"*0\r\n*2\r\n$1\r\nx\r\n:0\r\n-ERR unknown subcommand 'FOO'. Try PUBSUB HELP.\r\n-ERR wrong number of arguments for 'pubsub' command\r\n" +
				"-ERR wrong number of arguments for 'publish' command\r\n-ERR wrong number of arguments for 'pubsub|numpat' command\r\n" +
				"-ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. Try PUBSUB HELP.\r\n"},
		// The subscribed context: PING answers in a message's shape, and
		// only the (un)subscribing commands, PING, QUIT and RESET run.
		{sub, "PING\r\nPING x\r\nGET k\r\nCLIENT LIST\r\nFOO\r\nPING a b\r\nHELLO 3\r\n",
			"*2\r\n$4\r\npong\r\n$0\r\n\r\n*2\r\n$4\r\npong\r\n$1\r\nx\r\n" +
				"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n" +
				"-ERR Can't execute 'client|list': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n" +
				"-ERR unknown command 'FOO', with args beginning with: \r\n-ERR wrong number of arguments for 'ping' command\r\n" +
				"-ERR Can't execute 'hello': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"},
		{sub, "SUBSCRIBE news a\r\n", "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:3\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:4\r\n"},
		{sub, "UNSUBSCRIBE\r\n", "*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:3\r\n*3\r\n$11\r\nunsubscribe\r\n$4\r\nnews\r\n:2\r\n"},
		{sub, "PUNSUBSCRIBE x? zz\r\n", "*3\r\n$12\r\npunsubscribe\r\n$2\r\nx?\r\n:1\r\n*3\r\n$12\r\npunsubscribe\r\n$2\r\nzz\r\n:1\r\n"},
		{pub, "PUBLISH news 2\r\n", ":1\r\n"},
		{sub, "PUNSUBSCRIBE\r\n", "*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$1\r\n2\r\n*3\r\n$12\r\npunsubscribe\r\n$2\r\nn*\r\n:0\r\n"},
		// Out of the subscribed context, every command runs again.
		{sub, "UNSUBSCRIBE\r\nPUNSUBSCRIBE\r\nPING\r\nGET k\r\n",
			"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n+PONG\r\n$-1\r\n"},
		{sub, "SUBSCRIBE a\r\nRESET\r\nGET k\r\n", "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n+RESET\r\n$-1\r\n"},
		{pub, "PUBLISH a x\r\nPUBSUB NUMSUB a\r\n", ":0\r\n*2\r\n$1\r\na\r\n:0\r\n"},
		{sub, "SUBSCRIBE a\r\nQUIT\r\n", "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n+OK\r\n"},
	})
}

// TestPubSubRESP3 checks that messages and confirmations are pushes in
// RESP3, where a subscriber runs every command.
func TestPubSubRESP3(t *testing.T) {
	srv := start(t, server.Config{})
	sub, pub := 0, 1
	conns := []*rawConn{dialRaw(t, srv.Addr), dialRaw(t, srv.Addr)}
	conns[sub].send("HELLO 3\r\n")
	conns[sub].read()
	runScriptOn(t, conns, []step{
		{sub, "SUBSCRIBE news\r\nPSUBSCRIBE n*\r\n", ">3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n>3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:2\r\n"},
		{sub, "PING\r\nPING x\r\nGET k\r\nSET k v\r\n", "+PONG\r\n$1\r\nx\r\n_\r\n+OK\r\n"},
		{pub, "PUBLISH news hello\r\n", ":2\r\n"},
		{sub, "", ">3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n>4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$5\r\nhello\r\n"},
		// A subscriber's own message comes before PUBLISH's reply.
		{sub, "PUBLISH news self\r\n", ">3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$4\r\nself\r\n>4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$4\r\nself\r\n:2\r\n"},
		{sub, "UNSUBSCRIBE\r\nPUNSUBSCRIBE\r\nUNSUBSCRIBE\r\nPUNSUBSCRIBE z\r\n",
			">3\r\n$11\r\nunsubscribe\r\n$4\r\nnews\r\n:1\r\n>3\r\n$12\r\npunsubscribe\r\n$2\r\nn*\r\n:0\r\n" +
				">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n>3\r\n$12\r\npunsubscribe\r\n$1\r\nz\r\n:0\r\n"},
		// RESET goes back to RESP2, and out of the subscriptions.
		{sub, "SUBSCRIBE a\r\nRESET\r\nSUBSCRIBE a\r\n", ">3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n+RESET\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"},
		{pub, "PUBLISH a x\r\n", ":1\r\n"},
		{sub, "PING\r\n", "*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\nx\r\n*2\r\n$4\r\npong\r\n$0\r\n\r\n"},
	})
}

// runScriptOn runs steps over conns.
func runScriptOn(t *testing.T, conns []*rawConn, steps []step) {
	t.Helper()
	for _, s := range steps {
		if s.send != "" {
			conns[s.conn].send(s.send)
		}
		conns[s.conn].expectBytes(s.want)
	}
}

// TestPubSubGoRedis runs go-redis's PubSub against Flint: Subscribe and
// PSubscribe, Receive, and Channel, with publishers on other connections.
func TestPubSubGoRedis(t *testing.T) {
	srv := start(t, server.Config{})
	c := ctx(t)
	for _, proto := range []int{2, 3} {
		rdb := newClient(t, srv.Addr, &redis.Options{Protocol: proto})
		ps := rdb.Subscribe(c, "news")
		if err := ps.PSubscribe(c, "n*"); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"subscribe news 1", "psubscribe n* 2"} {
			msg, err := ps.Receive(c)
			if err != nil {
				t.Fatal(err)
			}
			s := msg.(*redis.Subscription)
			if got := s.Kind + " " + s.Channel + " " + strconv.Itoa(s.Count); got != want {
				t.Fatalf("RESP%d: %s, want %s", proto, got, want)
			}
		}
		ch := ps.Channel()
		const n = 100
		done := make(chan error, 1)
		go func() {
			for i := range n {
				if got, err := rdb.Publish(c, "news", strconv.Itoa(i)).Result(); err != nil || got != 2 {
					done <- err
					return
				}
			}
			done <- nil
		}()
		for i := range 2 * n {
			select {
			case m := <-ch:
				want := "news " + strconv.Itoa(i/2)
				if got := m.Channel + " " + m.Payload; got != want || (i%2 == 1) != (m.Pattern == "n*") {
					t.Fatalf("RESP%d: message %d is %s (pattern %q), want %s", proto, i, got, m.Pattern, want)
				}
			case <-c.Done():
				t.Fatal("timed out waiting for messages")
			}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := ps.Close(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the subscriber to leave", func() bool {
			return rdb.PubSubNumSub(c, "news").Val()["news"] == 0
		})
	}
}

// TestSlowSubscriber checks that a subscriber that reads nothing is
// disconnected once MaxPubSubOutput bytes wait for it, while the server
// goes on serving publishers.
func TestSlowSubscriber(t *testing.T) {
	const limit = 256 << 10
	srv := start(t, server.Config{MaxPubSubOutput: limit})
	// A small receive buffer, so that the kernel holds few of the bytes.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
	}}
	nc, err := d.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte("SUBSCRIBE slow\r\n")); err != nil {
		t.Fatal(err)
	}
	pub := dialRaw(t, srv.Addr)
	eventually(t, "the subscription", func() bool {
		return pub.do("PUBSUB", "NUMSUB", "slow").String() == `["slow" 1]`
	})
	msg := strings.Repeat("x", 16<<10)
	// The kernel's buffers on both sides hold some megabytes at most; 64
	// MiB published is far more than they and the limit take.
	published := 0
	for published < 64<<20 && pub.do("PUBSUB", "NUMSUB", "slow").String() == `["slow" 1]` {
		pub.do("PUBLISH", "slow", msg)
		published += len(msg)
	}
	if got := pub.do("PUBSUB", "NUMSUB", "slow").String(); got != `["slow" 0]` {
		t.Fatalf("after %d bytes published, NUMSUB = %s: the slow subscriber was not dropped", published, got)
	}
	// It gets what was sent before it was dropped, then the end.
	nc.SetReadDeadline(time.Now().Add(liveness))
	buf := make([]byte, 64<<10)
	for {
		if _, err := nc.Read(buf); err != nil {
			if !closedErr(err) {
				t.Fatalf("subscriber read %v, want the connection closed", err)
			}
			break
		}
	}
	pub.send("PING\r\n")
	pub.expectBytes("+PONG\r\n")
}

// peers is the backend of one node of a fake cluster whose nodes are
// known only by their client addresses: enough for forwarding.
type peers struct {
	server.Local
	self  uint64
	mu    sync.Mutex
	addrs []string // member i+1's
}

func (p *peers) Redirect() (string, bool) { return "", false }

func (p *peers) ClusterView() server.ClusterView {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := server.ClusterView{Self: p.self, Leader: 1}
	for i, a := range p.addrs {
		v.Members = append(v.Members, server.ClusterMember{ID: uint64(i + 1), Addr: a, Voter: true})
	}
	return v
}

// TestPublishForwarded checks that a message published on one node of a
// cluster reaches the subscribers of the others, once each, and that
// PUBLISH counts this node's subscribers only, as in Redis Cluster.
func TestPublishForwarded(t *testing.T) {
	cfg := server.Config{RequirePass: "secret"} // forwarding logs in
	var backends []*peers
	var addrs []string
	for i := range 3 {
		b := &peers{Local: server.Local{S: store.New(store.Options{})}, self: uint64(i + 1)}
		backends = append(backends, b)
		addrs = append(addrs, servertest.StartBackend(t, cfg, b).Addr)
	}
	// A fourth member is down: forwarding to it fails, and to the others
	// goes on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	for _, b := range backends {
		b.mu.Lock()
		b.addrs = append(slices.Clone(addrs), ln.Addr().String())
		b.mu.Unlock()
	}
	var subs []*rawConn
	for _, a := range addrs {
		sub := dialRaw(t, a)
		sub.send("AUTH secret\r\nSUBSCRIBE news\r\nPSUBSCRIBE n*\r\n")
		sub.expectBytes("+OK\r\n*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n*3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:2\r\n")
		subs = append(subs, sub)
	}
	pub := dialRaw(t, addrs[0])
	pub.send("AUTH secret\r\n")
	pub.expectBytes("+OK\r\n")
	for i := range 10 {
		pub.send(command("PUBLISH", "news", strconv.Itoa(i)))
		pub.expectBytes(":2\r\n") // node 1's subscriber, twice
	}
	for _, sub := range subs {
		for i := range 10 {
			m := strconv.Itoa(i)
			sub.expectBytes("*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$1\r\n" + m + "\r\n*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$1\r\n" + m + "\r\n")
		}
		sub.send("PING\r\n")
		sub.expectBytes("*2\r\n$4\r\npong\r\n$0\r\n\r\n") // nothing more came: no message twice
	}
}

// TestShardedPubSub checks SSUBSCRIBE, SUNSUBSCRIBE and SPUBLISH: shard
// channels are apart from channels, count their own subscriptions, and
// keep the connection in the subscribed context too.
func TestShardedPubSub(t *testing.T) {
	srv := start(t, server.Config{})
	sub, pub := 0, 1
	runScript(t, srv.Addr, 2, []step{
		{sub, "SUBSCRIBE a\r\nSSUBSCRIBE s1 s2\r\nPSUBSCRIBE p*\r\nSSUBSCRIBE s1\r\n",
			"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$10\r\nssubscribe\r\n$2\r\ns1\r\n:1\r\n*3\r\n$10\r\nssubscribe\r\n$2\r\ns2\r\n:2\r\n" +
				"*3\r\n$10\r\npsubscribe\r\n$2\r\np*\r\n:2\r\n*3\r\n$10\r\nssubscribe\r\n$2\r\ns1\r\n:2\r\n"},
		{pub, "SPUBLISH s1 hi\r\nPUBLISH s1 no\r\nPUBSUB SHARDCHANNELS s1*\r\nPUBSUB SHARDNUMSUB s1 x\r\nPUBSUB CHANNELS\r\nSPUBLISH a x\r\n",
			":1\r\n:0\r\n*1\r\n$2\r\ns1\r\n*4\r\n$2\r\ns1\r\n:1\r\n$1\r\nx\r\n:0\r\n*1\r\n$1\r\na\r\n:0\r\n"},
		{sub, "UNSUBSCRIBE\r\nPUNSUBSCRIBE\r\nPING\r\nGET x\r\n",
			"*3\r\n$8\r\nsmessage\r\n$2\r\ns1\r\n$2\r\nhi\r\n*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$12\r\npunsubscribe\r\n$2\r\np*\r\n:0\r\n" +
				"*2\r\n$4\r\npong\r\n$0\r\n\r\n-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"},
		{sub, "SUNSUBSCRIBE s1\r\nSUNSUBSCRIBE\r\nSUNSUBSCRIBE\r\nPING\r\n",
			"*3\r\n$12\r\nsunsubscribe\r\n$2\r\ns1\r\n:1\r\n*3\r\n$12\r\nsunsubscribe\r\n$2\r\ns2\r\n:0\r\n*3\r\n$12\r\nsunsubscribe\r\n$-1\r\n:0\r\n+PONG\r\n"},
	})
	raw := dialRaw(t, srv.Addr)
	raw.send("HELLO 3\r\n")
	raw.read()
	raw.send("SSUBSCRIBE x\r\nSPUBLISH x m\r\nSUNSUBSCRIBE\r\nSUNSUBSCRIBE\r\nSSUBSCRIBE\r\nSPUBLISH x\r\n")
	raw.expectBytes(">3\r\n$10\r\nssubscribe\r\n$1\r\nx\r\n:1\r\n>3\r\n$8\r\nsmessage\r\n$1\r\nx\r\n$1\r\nm\r\n:1\r\n" +
		">3\r\n$12\r\nsunsubscribe\r\n$1\r\nx\r\n:0\r\n>3\r\n$12\r\nsunsubscribe\r\n_\r\n:0\r\n" +
		"-ERR wrong number of arguments for 'ssubscribe' command\r\n-ERR wrong number of arguments for 'spublish' command\r\n")
}

// shardedPeers is peers in a fake sharded cluster of two groups: group 1,
// the nodes of the ClusterView, owns the slots up to 16000; group 2, node
// other, the rest.
type shardedPeers struct {
	*peers
	other string
}

func (p shardedPeers) Shards() *server.Shards {
	v := p.ClusterView()
	var g1 []shardmap.Member
	for _, m := range v.Members {
		g1 = append(g1, shardmap.Member{ID: m.ID, Addr: m.Addr})
	}
	m, err := shardmap.New(1, []shardmap.Group{
		{ID: 1, Slots: []shardmap.Range{{First: 0, Last: 16000}}, Members: g1},
		{ID: 2, Slots: []shardmap.Range{{First: 16001, Last: slot.Count - 1}}, Members: []shardmap.Member{{ID: 1, Addr: p.other}}},
	})
	if err != nil {
		panic(err)
	}
	return &server.Shards{Map: m, Group: 1, Leaders: map[uint64]uint64{1: 1, 2: 1}}
}

// TestSPublishForwarded checks that in a sharded cluster SSUBSCRIBE is
// routed by the shard channel's slot, and SPUBLISH reaches the subscribers
// of the other members of the slot's group.
func TestSPublishForwarded(t *testing.T) {
	other := start(t, server.Config{}).Addr // group 2's only member: a plain server will do
	var backends []*peers
	var addrs []string
	for i := range 2 {
		b := &peers{Local: server.Local{S: store.New(store.Options{})}, self: uint64(i + 1)}
		backends = append(backends, b)
		addrs = append(addrs, servertest.StartBackend(t, server.Config{}, shardedPeers{b, other}).Addr)
	}
	for _, b := range backends {
		b.mu.Lock()
		b.addrs = addrs
		b.mu.Unlock()
	}
	sub := dialRaw(t, addrs[1])
	sub.send("SSUBSCRIBE news\r\n")
	sub.expectBytes("*3\r\n$10\r\nssubscribe\r\n$4\r\nnews\r\n:1\r\n")
	pub := dialRaw(t, addrs[0])
	pub.send("SPUBLISH news hi\r\n")
	pub.expectBytes(":0\r\n")
	sub.expectBytes("*3\r\n$8\r\nsmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n")
	// A shard channel of group 2's slots is group 2's.
	ch := ""
	for i := 0; ch == "" && i < 100000; i++ {
		if c := "c" + strconv.Itoa(i); slot.Of([]byte(c)) > 16000 {
			ch = c
		}
	}
	want := fmt.Sprintf("-MOVED %d %s\r\n", slot.Of([]byte(ch)), other)
	pub.send(command("SSUBSCRIBE", ch) + command("SPUBLISH", ch, "x"))
	pub.expectBytes(want + want)
}
