package crashtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/client"
)

// callTimeout bounds every call to the server. A call to a killed server
// fails at once (the connection is reset); the deadline is for a server that
// stalls, which then makes the worker stop for the cycle.
const callTimeout = 2 * time.Second

// session is one worker's connection, through either client. call sends one
// command alone (pipelined false) or several as one pipeline, and returns
// one reply per command; error replies are replies. With an error, it
// returns the replies that came before it, a prefix of the commands' (none
// with Flint's client, which does not give them): the outcome of every
// command after them is unknown.
type session interface {
	call(ctx context.Context, cmds [][]any, pipelined bool) ([]reply, error)
	Close() error
}

// dial opens a session on addr: even workers use Flint's client, odd ones
// go-redis.
func dial(w int, addr string) (session, error) {
	if w%2 == 0 {
		c, err := client.New(addr, client.WithPoolSize(1), client.WithDialTimeout(callTimeout))
		if err != nil {
			return nil, err
		}
		return flintSession{c}, nil
	}
	return redisSession{redis.NewClient(&redis.Options{
		Addr: addr, Protocol: 3, PoolSize: 1, PipelinePoolSize: -1, MaxRetries: -1,
		DialTimeout: callTimeout, DialerRetries: 1, ReadTimeout: callTimeout, WriteTimeout: callTimeout,
		ContextTimeoutEnabled: true, DisableIdentity: true,
	})}, nil
}

type flintSession struct{ c *client.Client }

func (s flintSession) Close() error { return s.c.Close() }

func (s flintSession) call(ctx context.Context, cmds [][]any, pipelined bool) ([]reply, error) {
	if !pipelined {
		v, err := s.c.Do(ctx, cmds[0]...)
		var re *client.ReplyError
		if err != nil && !errors.As(err, &re) {
			return nil, err
		}
		r, err := flintReply(v)
		return []reply{r}, err
	}
	b := s.c.Batch()
	for _, c := range cmds {
		b.Do(c...)
	}
	vals, err := b.Exec(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]reply, len(vals))
	for i, v := range vals {
		if out[i], err = flintReply(v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func flintReply(v client.Value) (reply, error) {
	switch v.Kind {
	case client.KindSimple, client.KindBulk:
		return reply{kind: replyStr, str: string(v.Str)}, nil
	case client.KindInt:
		return reply{kind: replyInt, n: v.Int}, nil
	case client.KindNull:
		return reply{kind: replyNil}, nil
	case client.KindError:
		return reply{kind: replyErr, str: string(v.Str)}, nil
	}
	return reply{}, fmt.Errorf("unexpected reply %v", v)
}

type redisSession struct{ c *redis.Client }

// go-redis logs failed dials, which every cycle's kill causes, to stderr.
func init() { redis.SetLogger(quietLogger{}) }

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func (s redisSession) Close() error { return s.c.Close() }

func (s redisSession) call(ctx context.Context, cmds [][]any, pipelined bool) ([]reply, error) {
	if !pipelined {
		r, err := redisReply(s.c.Do(ctx, cmds[0]...).Result())
		if err != nil {
			return nil, err
		}
		return []reply{r}, nil
	}
	pipe := s.c.Pipeline()
	rcmds := make([]*redis.Cmd, len(cmds))
	for i, c := range cmds {
		rcmds[i] = pipe.Do(ctx, c...)
	}
	pipe.Exec(ctx) // its error is the first command's; each is looked at below
	out := make([]reply, 0, len(cmds))
	for _, c := range rcmds {
		r, err := redisReply(c.Result())
		if err != nil {
			return out, err // replies come in order: the ones before came
		}
		out = append(out, r)
	}
	return out, nil
}

// redisReply turns a go-redis result into a reply; the error is not nil
// only if the command got no reply.
func redisReply(v any, err error) (reply, error) {
	var re redis.Error
	switch {
	case errors.Is(err, redis.Nil):
		return reply{kind: replyNil}, nil
	case errors.As(err, &re):
		return reply{kind: replyErr, str: err.Error()}, nil
	case err != nil:
		return reply{}, err
	}
	switch v := v.(type) {
	case string:
		return reply{kind: replyStr, str: v}, nil
	case int64:
		return reply{kind: replyInt, n: v}, nil
	}
	return reply{}, fmt.Errorf("unexpected reply %T %v", v, v)
}
