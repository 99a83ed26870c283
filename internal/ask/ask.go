// Package ask sends one command to one server, over a connection of its
// own, and returns its reply: for the questions a node or a tool puts to a
// particular member (its role, its view of the cluster), which a
// client.Client would send to the leader instead.
package ask

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
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
	c, err := dial(ctx, addr, password)
	if err != nil {
		return protocol.Value{}, err
	}
	defer c.nc.Close()
	return c.ask(ctx, args)
}

// conn is a connection to one server.
type conn struct {
	nc net.Conn
	rd *protocol.Reader
}

// dial connects to addr and sends AUTH password, if not empty.
func dial(ctx context.Context, addr, password string) (*conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &conn{nc: nc, rd: protocol.NewReader(bufio.NewReader(nc), protocol.DefaultReaderLimits)}
	if password != "" {
		if _, err := c.ask(ctx, []string{"AUTH", password}); err != nil {
			nc.Close()
			return nil, err
		}
	}
	return c, nil
}

// ask sends args and returns the reply, by ctx's deadline if it has one.
func (c *conn) ask(ctx context.Context, args []string) (protocol.Value, error) {
	dl, _ := ctx.Deadline() // the zero time: none
	c.nc.SetDeadline(dl)
	if _, err := c.nc.Write(protocol.AppendCommand(nil, bytesOf(args)...)); err != nil {
		return protocol.Value{}, err
	}
	v, err := c.rd.Read()
	if err == nil && v.IsError() {
		return v, &client.ReplyError{Msg: string(v.Str)}
	}
	return v, err
}

// Pool keeps a connection to each address it asks, for a caller that asks
// the same servers again and again, as a manager polls every member: a
// connection of its own for each question would leave a socket in
// TIME_WAIT each time, thousands a minute. A connection that fails is
// closed, and dialed again at the next question; an error reply keeps it.
// Questions to one address are asked one at a time. A Pool is safe for
// concurrent use.
type Pool struct {
	password string
	mu       sync.Mutex
	conns    map[string]*pooled // by address; only those asked since the last Forget
	// last is the map Map decoded last, and enc its encoding: a node asks
	// for the map every poll, and it seldom changes.
	last struct {
		sync.Mutex
		enc []byte
		m   *shardmap.Map
	}
}

// pooled is the pool's connection to one address, c nil while there is
// none.
type pooled struct {
	mu sync.Mutex
	c  *conn
}

// NewPool returns an empty pool whose connections AUTH with password, if
// not empty.
func NewPool(password string) *Pool {
	return &Pool{password: password, conns: map[string]*pooled{}}
}

// One is One of package ask, over the pool's connection to addr.
func (p *Pool) One(ctx context.Context, addr string, args ...string) (protocol.Value, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	p.mu.Lock()
	pc := p.conns[addr]
	if pc == nil {
		pc = &pooled{}
		p.conns[addr] = pc
	}
	p.mu.Unlock()
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.c == nil {
		c, err := dial(ctx, addr, p.password)
		if err != nil {
			return protocol.Value{}, err
		}
		pc.c = c
	}
	v, err := pc.c.ask(ctx, args)
	if err != nil && !errors.As(err, new(*client.ReplyError)) {
		pc.c.nc.Close()
		pc.c = nil
	}
	return v, err
}

// Close closes the pool's connections. The pool may be used again.
func (p *Pool) Close() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[string]*pooled{}
	p.mu.Unlock()
	for _, pc := range conns {
		pc.mu.Lock()
		if pc.c != nil {
			pc.c.nc.Close()
			pc.c = nil
		}
		pc.mu.Unlock()
	}
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
	return parseMap(addr, v, err, shardmap.Decode)
}

// Map is Map of package ask, over the pool's connection to addr, except
// that once it has a map it sends its epoch (FLINT.MAP epoch), and the
// node sends the map only if its own is of another epoch.
func (p *Pool) Map(ctx context.Context, addr string) (*shardmap.Map, map[uint64]uint64, map[shardmap.MemberKey]bool, error) {
	args := []string{"FLINT.MAP"}
	p.last.Lock()
	if p.last.m != nil { // so that the map comes only if it is of another epoch
		args = append(args, strconv.FormatUint(p.last.m.Epoch, 10))
	}
	p.last.Unlock()
	v, err := p.One(ctx, addr, args...)
	return parseMap(addr, v, err, p.decode)
}

// decode decodes a map's encoding, or returns the map it decoded last if
// enc is nil (the node has a map of its epoch: see Map) or the same (a map
// is never modified once decoded).
func (p *Pool) decode(enc []byte) (*shardmap.Map, error) {
	p.last.Lock()
	defer p.last.Unlock()
	if p.last.m != nil && (enc == nil || bytes.Equal(enc, p.last.enc)) {
		return p.last.m, nil
	}
	m, err := shardmap.Decode(enc)
	if err == nil {
		p.last.enc, p.last.m = bytes.Clone(enc), m
	}
	return m, err
}

// parseMap parses the reply v to FLINT.MAP from addr, decoding the map
// with decode, or returns err.
func parseMap(addr string, v protocol.Value, err error, decode func([]byte) (*shardmap.Map, error)) (*shardmap.Map, map[uint64]uint64, map[shardmap.MemberKey]bool, error) {
	if err != nil {
		return nil, nil, nil, err
	}
	if len(v.Elems) != 3 || len(v.Elems[1].Elems)%2 != 0 || len(v.Elems[2].Elems)%2 != 0 {
		return nil, nil, nil, fmt.Errorf("ask: a malformed FLINT.MAP reply from %s", addr)
	}
	m, err := decode(v.Elems[0].Str)
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
