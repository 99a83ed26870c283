package server_test

import (
	"errors"
	"maps"
	"testing"

	"github.com/flintkv/flint/internal/server"
	"github.com/flintkv/flint/internal/server/servertest"
	"github.com/flintkv/flint/internal/store"
)

// groupHost is a Backend that starts groups (server.GroupHost): it records
// each start, and refuses group 9.
type groupHost struct {
	server.Local
	started map[uint64]map[uint64]string
}

func (g *groupHost) StartGroup(id uint64, members map[uint64]string) error {
	if id == 9 {
		return errors.New("group 9 runs on this node already, with other members")
	}
	g.started[id] = members
	return nil
}

// TestGroupStart: FLINT.GROUP START hands a node that hosts groups the
// group and its members, and answers its refusal; bad arguments are
// refused before it is asked, and a server that hosts no groups refuses.
func TestGroupStart(t *testing.T) {
	g := &groupHost{Local: server.Local{S: store.New(store.Options{})}, started: map[uint64]map[uint64]string{}}
	c := dialRaw(t, servertest.StartBackend(t, server.Config{}, g).Addr)
	if got := c.do("FLINT.GROUP", "start", "3", "1=127.0.0.1:7001", "2=127.0.0.1:7002").String(); got != `"OK"` {
		t.Fatalf("FLINT.GROUP START: %s", got)
	}
	if want := map[uint64]string{1: "127.0.0.1:7001", 2: "127.0.0.1:7002"}; !maps.Equal(g.started[3], want) {
		t.Fatalf("started group 3 with %v, want %v", g.started[3], want)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"FLINT.GROUP", "START", "3"}, "(error) ERR wrong number of arguments for 'flint.group' command"},
		{[]string{"FLINT.GROUP", "STOP", "3", "1=127.0.0.1:7001"}, "(error) ERR unknown subcommand 'STOP': FLINT.GROUP START group node=host:port ..."},
		{[]string{"FLINT.GROUP", "START", "0", "1=127.0.0.1:7001"}, "(error) ERR the group id must be a positive integer"},
		{[]string{"FLINT.GROUP", "START", "4", "x=127.0.0.1:7001"}, "(error) ERR bad member 'x=127.0.0.1:7001': want node=host:port, node a positive integer"},
		{[]string{"FLINT.GROUP", "START", "4", "1=127.0.0.1:7001", "1=127.0.0.1:7002"}, "(error) ERR node 1 is named twice"},
		{[]string{"FLINT.GROUP", "START", "4", "1=nowhere"}, "(error) ERR bad client address in '1=nowhere': address nowhere: missing port in address"},
		{[]string{"FLINT.GROUP", "START", "9", "1=127.0.0.1:7001"}, "(error) ERR group 9 runs on this node already, with other members"},
	} {
		if got := c.do(tc.args...).String(); got != tc.want {
			t.Errorf("%q: %s, want %s", tc.args, got, tc.want)
		}
	}
	if len(g.started) != 1 {
		t.Errorf("the refusals started groups: %v", g.started)
	}
	plain := dialRaw(t, servertest.Start(t, server.Config{}).Addr)
	if got := plain.do("FLINT.GROUP", "START", "3", "1=127.0.0.1:7001").String(); got != "(error) ERR this server is not a node that hosts groups: it starts none" {
		t.Errorf("at a server that hosts no groups: %s", got)
	}
}
