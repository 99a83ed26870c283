// Package ask sends one command to one server, over a connection of its
// own, and returns its reply: for the questions a node or a tool puts to a
// particular member (its role, its view of the cluster), which a
// client.Client would send to the leader instead.
package ask

import (
	"bufio"
	"context"
	"net"
	"time"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/protocol"
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
