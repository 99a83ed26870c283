// Package ask sends one command to one server, over a connection of its
// own, and returns its reply: for the questions a node or a tool puts to a
// particular member (its role, its view of the cluster), which a
// client.Client would send to the leader instead.
package ask

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"time"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/protocol"
	"github.com/flintkv/flint/internal/shardmap"
)

// Timeout bounds one question when the caller's context has no earlier
// deadline.
const Timeout = 3 * time.Second

// One sends args to the server at addr, after AUTH password if password is
// not empty, and returns the reply, waiting at most Timeout. An error
// reply is returned as a *client.ReplyError.
func One(ctx context.Context, addr, password string, args ...string) (protocol.Value, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	return Wait(ctx, addr, password, args...)
}

// Wait is One for a command that may take long (adding a member waits
// until it has caught up): it waits as long as ctx allows.
func Wait(ctx context.Context, addr, password string, args ...string) (protocol.Value, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return protocol.Value{}, err
	}
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	rd := protocol.NewReader(bufio.NewReader(nc), protocol.DefaultReaderLimits)
	var cmds [][][]byte
	if password != "" {
		cmds = append(cmds, [][]byte{[]byte("AUTH"), []byte(password)})
	}
	cmds = append(cmds, bytesOf(args))
	var v protocol.Value
	for _, c := range cmds {
		if _, err := nc.Write(protocol.AppendCommand(nil, c...)); err != nil {
			return v, err
		}
		if v, err = rd.Read(); err != nil {
			return v, err
		}
		if v.IsError() {
			return v, &client.ReplyError{Msg: string(v.Str)}
		}
	}
	return v, nil
}

func bytesOf(args []string) [][]byte {
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	return b
}

// Map asks the node of a sharded cluster at addr for the cluster map, the
// leaders it knows by group, and the members it knows are down (FLINT.MAP;
// see package server).
func Map(ctx context.Context, addr, password string) (*shardmap.Map, map[uint64]uint64, map[shardmap.MemberKey]bool, error) {
	v, err := One(ctx, addr, password, "FLINT.MAP")
	if err != nil {
		return nil, nil, nil, err
	}
	if len(v.Elems) != 3 || len(v.Elems[1].Elems)%2 != 0 || len(v.Elems[2].Elems)%2 != 0 {
		return nil, nil, nil, fmt.Errorf("ask: a malformed FLINT.MAP reply from %s", addr)
	}
	m, err := shardmap.Decode(v.Elems[0].Str)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("ask: the map from %s: %w", addr, err)
	}
	leaders, down := map[uint64]uint64{}, map[shardmap.MemberKey]bool{}
	for p := v.Elems[1].Elems; len(p) >= 2; p = p[2:] {
		leaders[uint64(p[0].Int)] = uint64(p[1].Int)
	}
	for p := v.Elems[2].Elems; len(p) >= 2; p = p[2:] {
		down[shardmap.MemberKey{Group: uint64(p[0].Int), Member: uint64(p[1].Int)}] = true
	}
	return m, leaders, down, nil
}
