package check

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/protocol"
)

// outcome is what became of one command.
type outcome uint8

const (
	// replied: the reply came (possibly an error reply).
	replied outcome = iota
	// notSent: no connection could carry the command, so it did not
	// happen and is left out of the history.
	notSent
	// unknown: the command was sent, or may have been, and no reply came:
	// it may or may not have taken effect.
	unknown
)

// session is one client's connection to the server, through Flint's
// client: its errors tell a command that was never sent (client.ErrConnect)
// from one whose outcome is unknown (client.ErrUnknownOutcome), and it
// reconnects by itself on the next call after its connection broke.
type session struct {
	c       *client.Client
	timeout time.Duration
}

// newSession connects to the first of addrs; the others are seeds: the
// client turns to them when it fails, and follows MOVED between them. With
// sessions, it writes in a session.
func newSession(addrs []string, timeout time.Duration, sessions bool) (*session, error) {
	opts := []client.Option{client.WithPoolSize(1), client.WithDialTimeout(timeout), client.WithSeeds(addrs[1:]...)}
	if sessions {
		opts = append(opts, client.WithSessions())
	}
	c, err := client.New(addrs[0], opts...)
	if err != nil {
		return nil, err
	}
	return &session{c: c, timeout: timeout}, nil
}

// do sends cmd and waits at most the session's timeout for its reply.
// When the outcome is not replied, err says why.
func (s *session) do(ctx context.Context, cmd []string) (reply, outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	v, err := s.send(ctx, cmd)
	var re *client.ReplyError
	switch {
	case err == nil:
		return fromValue(v), replied, nil
	case errors.As(err, &re):
		return errReply(re.Msg), replied, nil
	case errors.Is(err, client.ErrConnect) && !errors.Is(err, client.ErrUnknownOutcome):
		return reply{}, notSent, err
	}
	// ErrUnknownOutcome, a deadline, or anything else: the command may
	// have been written, so it may have taken effect.
	return reply{}, unknown, err
}

// send sends cmd and returns its reply. A MULTI goes as a Batch of
// MULTI, its queued commands and EXEC, on one connection, and its reply is
// EXEC's.
func (s *session) send(ctx context.Context, cmd []string) (client.Value, error) {
	subs, multi := splitMulti(cmd)
	if !multi {
		return s.c.Do(ctx, anys(cmd)...)
	}
	b := s.c.Batch()
	b.Do("MULTI")
	for _, sub := range subs {
		b.Do(anys(sub)...)
	}
	b.Do("EXEC")
	vs, err := b.Exec(ctx)
	if err != nil {
		return client.Value{}, err
	}
	return vs[len(vs)-1], nil
}

// anys returns args as Client.Do takes them.
func anys(args []string) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
	}
	return out
}

func (s *session) close() { s.c.Close() }

// caller is what a workload client sends its commands through.
type caller interface {
	do(ctx context.Context, cmd []string) (reply, outcome, error)
	close()
}

// follower is a reader pinned to one member of a group: its connection
// says READONLY, so that the member serves its reads itself (through the
// group's read index) rather than redirecting them to the leader. It
// reconnects, and says READONLY again, after any failure. It sends reads
// only, so an unknown outcome costs nothing.
type follower struct {
	addr    string
	timeout time.Duration
	nc      net.Conn
	rd      *protocol.Reader
}

// do sends cmd, a read, on the member's connection, opening it first if
// there is none.
func (f *follower) do(ctx context.Context, cmd []string) (reply, outcome, error) {
	deadline := time.Now().Add(f.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if f.nc == nil {
		if err := f.connect(deadline); err != nil {
			return reply{}, notSent, err
		}
	}
	f.nc.SetDeadline(deadline)
	if _, err := f.nc.Write(appendCommand(nil, cmd...)); err != nil {
		f.close()
		return reply{}, unknown, err
	}
	v, err := f.rd.Read()
	if err != nil {
		f.close()
		return reply{}, unknown, err
	}
	if v.IsError() {
		return errReply(string(v.Str)), replied, nil
	}
	return fromValue(v), replied, nil
}

// connect opens the connection and says READONLY on it.
func (f *follower) connect(deadline time.Time) error {
	nc, err := net.DialTimeout("tcp", f.addr, time.Until(deadline))
	if err != nil {
		return err
	}
	nc.SetDeadline(deadline)
	rd := protocol.NewReader(bufio.NewReader(nc), protocol.DefaultReaderLimits)
	if _, err := nc.Write(appendCommand(nil, "READONLY")); err != nil {
		nc.Close()
		return err
	}
	if v, err := rd.Read(); err != nil || v.IsError() {
		nc.Close()
		return fmt.Errorf("READONLY: %v %v", v, err)
	}
	f.nc, f.rd = nc, rd
	return nil
}

func (f *follower) close() {
	if f.nc != nil {
		f.nc.Close()
		f.nc = nil
	}
}

// appendCommand appends the RESP encoding of args to b.
func appendCommand(b []byte, args ...string) []byte {
	b = protocol.AppendArray(b, len(args))
	for _, a := range args {
		b = protocol.AppendBulkString(b, a)
	}
	return b
}
