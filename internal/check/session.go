package check

import (
	"context"
	"errors"
	"time"

	"github.com/flintkv/flint/client"
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
	args := make([]any, len(cmd))
	for i, a := range cmd {
		args[i] = a
	}
	v, err := s.c.Do(ctx, args...)
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

func (s *session) close() { s.c.Close() }
