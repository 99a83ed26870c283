// Package lineclient runs the line protocol through which the users' test
// harnesses drive a key-value store: commands on one input stream, one at
// a time, results on an output stream.
//
//	input line        output
//	PUT <k> <v>       PUT <k> found        |  PUT <k> not_found
//	SWAP <k> <v>      SWAP <k> <old>       |  SWAP <k> null
//	GET <k>           GET <k> <v>          |  GET <k> null
//	DELETE <k>        DELETE <k> found     |  DELETE <k> not_found
//	SCAN <k1> <k2>    SCAN <k1> <k2> BEGIN
//	                    <k> <v>            (each pair with k1 <= k <= k2, in order)
//	                  SCAN END
//	STOP              STOP                 (and stop reading)
//
// Tokens are separated by any whitespace and blank lines are skipped. The
// output is flushed after every response. The end of the input acts as
// STOP: it too prints STOP. A malformed line (an unknown command or the
// wrong number of tokens) is reported on the diagnostic stream and skipped,
// writing nothing to the output, so the output holds only responses.
//
// Each command is one Flint command, so it is atomic and linearizable as the
// server's commands are: PUT is SET k v GET (never GET then SET), SWAP is
// SWAP, GET is GET, DELETE is DEL and SCAN is RANGE k1 k2. Against a sharded
// cluster the Go client sends each key's command to its group, and SCAN's
// RANGE to every group, merging their pairs in key order: each pair is
// linearizable, as the users' scan rule asks, but the scan as a whole is
// not one instant's; it waits while a group that owns part of it has no
// leader.
//
// # Failures
//
// The line client never gives up on a command because a server is down or
// an election is running: a test harness that kills and restarts servers
// sees a slow response, not a client that exits. Connect waits for a member
// to accept a connection, and each command is sent until it is answered:
// the Go client follows MOVED and retries refusals and failures (see
// package client), waiting up to about a second between tries.
//
// Connect makes a client with sessions (client.WithSessions), so a write
// whose connection broke after it was sent is sent again, with the same
// sequence number, and takes effect once: the response printed is that of
// its one effect. Reads are sent again freely. Two cases remain where a
// write may take effect twice, and Run then sends it again after a wait all
// the same, since the harness wants an answer: a server without sessions
// (Redis, or a Flint store without the replicated log), where each send
// takes effect at most once; and a write whose session expired while it
// was being sent again (after ten minutes of a session unused, by
// default). A PUT that took effect twice reports found, its own value
// being there. A server's error reply other than a refusal (a wrong
// password, an out-of-memory error) ends the run.
package lineclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/backoff"
)

// Connect returns a client of the members at addrs (host:port each, at
// least one), as client.New with client.WithSeeds and client.WithSessions
// makes it, once one of them
// accepts a connection. Until then it tries them all again after waits of
// up to about a second, and says so once on diag. It fails if a server
// refuses the connection, such as for a wrong password, or if ctx ends.
func Connect(ctx context.Context, addrs []string, diag io.Writer, opts ...client.Option) (*client.Client, error) {
	if len(addrs) == 0 {
		return nil, errors.New("lineclient: no server address")
	}
	opts = append(slices.Clip(opts), client.WithSeeds(addrs[1:]...), client.WithSessions())
	wait := backoff.Default()
	for said := false; ; said = true {
		c, err := client.New(addrs[0], opts...)
		if err == nil || !unanswered(err) {
			return c, err
		}
		if !said {
			fmt.Fprintf(diag, "no server answers at %s yet (%v); waiting for one\n", strings.Join(addrs, ","), err)
		}
		if werr := wait.Wait(ctx); werr != nil {
			return nil, fmt.Errorf("%w (last error: %w)", werr, err)
		}
	}
}

// unanswered reports whether err says that no server answered: a failure
// to connect, or a connection that broke after the request was sent. A
// server's error reply, a handshake refused included, is an answer.
func unanswered(err error) bool {
	if _, replied := errors.AsType[*client.ReplyError](err); replied {
		return false
	}
	return errors.Is(err, client.ErrConnect) || errors.Is(err, client.ErrUnknownOutcome)
}

// Run reads commands from in and runs each against c, writing the responses
// to out and reports of malformed lines to diag. A command that no server
// answers is sent again, as the package doc says, until one does or ctx
// ends. Run returns nil after STOP or at the end of the input, and an error
// if reading or writing fails, ctx ends, or a server answers a command with
// an error (then the command may or may not have taken effect).
func Run(ctx context.Context, c *client.Client, in io.Reader, out, diag io.Writer) error {
	s := session{c: c, out: bufio.NewWriter(out), diag: diag}
	r := bufio.NewReader(in)
	for lineNo := 1; ; lineNo++ {
		line, rerr := r.ReadString('\n')
		if rerr != nil && rerr != io.EOF {
			return fmt.Errorf("reading input: %w", rerr)
		}
		stop, err := s.line(ctx, lineNo, line)
		if err != nil {
			return err
		}
		if stop || rerr == io.EOF {
			return s.stop()
		}
	}
}

// session is one run's connection and output streams.
type session struct {
	c    *client.Client
	out  *bufio.Writer
	diag io.Writer
}

// arity is the number of tokens of each command, its name included.
var arity = map[string]int{"PUT": 3, "SWAP": 3, "GET": 2, "DELETE": 2, "SCAN": 3, "STOP": 1}

// usage shows each command's form in messages about malformed lines.
var usage = map[string]string{
	"PUT": "PUT <key> <value>", "SWAP": "SWAP <key> <value>", "GET": "GET <key>",
	"DELETE": "DELETE <key>", "SCAN": "SCAN <start> <end>", "STOP": "STOP",
}

// line runs one input line and reports whether it was STOP.
func (s *session) line(ctx context.Context, lineNo int, line string) (stop bool, err error) {
	tok := strings.Fields(line)
	if len(tok) == 0 {
		return false, nil
	}
	want, ok := arity[tok[0]]
	switch {
	case !ok:
		s.malformed(lineNo, "unknown command %q; the commands are PUT, SWAP, GET, DELETE, SCAN and STOP, in upper case", tok[0])
		return false, nil
	case len(tok) != want:
		s.malformed(lineNo, "%s takes %d tokens, got %d; use: %s", tok[0], want, len(tok), usage[tok[0]])
		return false, nil
	case tok[0] == "STOP":
		return true, nil
	}
	if err := s.untilAnswered(ctx, tok); err != nil {
		return false, fmt.Errorf("line %d: %s: %w", lineNo, strings.Join(tok, " "), err)
	}
	if err := s.out.Flush(); err != nil {
		return false, fmt.Errorf("writing output: %w", err)
	}
	return false, nil
}

func (s *session) malformed(lineNo int, format string, args ...any) {
	fmt.Fprintf(s.diag, "line %d ignored: %s\n", lineNo, fmt.Sprintf(format, args...))
}

func (s *session) stop() error {
	s.out.WriteString("STOP\n")
	if err := s.out.Flush(); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}

// untilAnswered runs a command until a server answers it, waiting between
// tries. A failed try buffers no output.
func (s *session) untilAnswered(ctx context.Context, tok []string) error {
	wait := backoff.Default()
	for {
		err := s.run(ctx, tok)
		if err == nil || !unanswered(err) || ctx.Err() != nil {
			return err
		}
		if werr := wait.Wait(ctx); werr != nil {
			return fmt.Errorf("%w (last error: %w)", werr, err)
		}
	}
}

// run executes a well-formed command other than STOP and buffers its
// response.
func (s *session) run(ctx context.Context, tok []string) error {
	switch tok[0] {
	case "PUT":
		old, err := s.c.Do(ctx, "SET", tok[1], tok[2], "GET")
		if err != nil {
			return err
		}
		s.respond(tok[:2], foundWord(old.Kind != client.KindNull))
	case "SWAP":
		old, err := s.c.Swap(ctx, tok[1], []byte(tok[2]))
		return s.value(tok[:2], old, err)
	case "GET":
		v, err := s.c.Get(ctx, tok[1])
		return s.value(tok[:2], v, err)
	case "DELETE":
		n, err := s.c.Delete(ctx, tok[1])
		if err != nil {
			return err
		}
		s.respond(tok, foundWord(n == 1))
	case "SCAN":
		return s.scan(ctx, tok)
	}
	return nil
}

func foundWord(found bool) string {
	if found {
		return "found"
	}
	return "not_found"
}

// value responds with v, or null for ErrNil.
func (s *session) value(prefix []string, v []byte, err error) error {
	switch {
	case errors.Is(err, client.ErrNil):
		s.respond(prefix, "null")
	case err != nil:
		return err
	default:
		s.respond(prefix, string(v))
	}
	return nil
}

func (s *session) scan(ctx context.Context, tok []string) error {
	kvs, err := s.c.Range(ctx, tok[1], tok[2], 0)
	if err != nil {
		return err
	}
	s.respond(tok, "BEGIN")
	for _, kv := range kvs {
		fmt.Fprintf(s.out, "  %s %s\n", kv.Key, kv.Value)
	}
	s.out.WriteString("SCAN END\n")
	return nil
}

// respond buffers one response line: the words of prefix, then last.
func (s *session) respond(prefix []string, last string) {
	for _, w := range prefix {
		s.out.WriteString(w)
		s.out.WriteByte(' ')
	}
	s.out.WriteString(last)
	s.out.WriteByte('\n')
}
