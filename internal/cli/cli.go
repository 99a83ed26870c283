// Package cli is `flint cli`, a command line client that looks and behaves
// like redis-cli 7: it sends one command given as arguments, or the
// commands read from stdin, one per line, with a prompt when stdin is a
// terminal, and prints each reply exactly as redis-cli would.
//
// It speaks RESP itself over a net.Conn with internal/protocol rather than
// through the public client package, because printing like redis-cli needs
// the exact type of every reply: a simple string OK and a bulk string "OK"
// print differently.
//
// Where it departs from redis-cli on purpose (all for scripts' sake):
//   - A rejected AUTH or HELLO 3 ends a one-shot or piped run with exit
//     status 1; redis-cli 7.0 prints "AUTH failed" and goes on to send the
//     command unauthenticated.
//   - Piped input stops with exit status 1 when the server cannot be
//     reached, and exits 1 at the end if any command got no reply;
//     redis-cli prints the error for each line and exits 0.
//   - RESP3 big numbers print as "(big number) N"; redis-cli 7.0 aborts.
//
// Not carried over: line editing and history (the terminal's own line
// discipline edits the line), hints, the local HELP command, repeat counts
// ("3 PING"), --eval, and the pubsub and monitor modes Flint has no
// commands for.
package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/flintkv/flint/internal/protocol"
)

// Defaults of Config, the address `flint serve` listens on.
const (
	DefaultHost = "127.0.0.1"
	DefaultPort = 7379
)

// Config says where to connect and how to print.
type Config struct {
	Host     string
	Port     int
	Password string // sent with AUTH after every connect; empty: none
	RESP3    bool   // send HELLO 3 after connecting (and after AUTH)
	// Raw prints replies raw, as redis-cli does when stdout is not a
	// terminal or with --raw: strings bare, nil as an empty line.
	Raw bool
	// ErrExit is redis-cli's -e: an error reply to a one-shot command is
	// printed bare to stderr and the exit status is 1. Without it the exit
	// status is 0 whatever the reply, as in redis-cli. Like redis-cli, it
	// does not apply to commands read from stdin.
	ErrExit bool
	// Interactive prompts for each command and goes on when the server
	// cannot be reached; for stdin that is a terminal.
	Interactive bool
}

// Run runs the client and returns its exit status. With args it sends
// them as one command; without, it reads commands from stdin until EOF or
// quit or exit.
func Run(cfg Config, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	s := &session{cfg: cfg, stderr: stderr}
	defer s.close()
	if len(args) > 0 {
		return oneShot(s, args, stdout)
	}
	if cfg.Interactive {
		return interactive(s, stdin, stdout)
	}
	return piped(s, stdin, stdout)
}

// oneShot sends one command and prints its reply.
func oneShot(s *session, args []string, stdout io.Writer) int {
	if s.connect() != nil {
		return 1
	}
	bargs := make([][]byte, len(args))
	for i, a := range args {
		bargs[i] = []byte(a)
	}
	v, err := s.do(bargs)
	if err != nil {
		return 1
	}
	if s.cfg.ErrExit && v.IsError() {
		fmt.Fprintf(s.stderr, "%s\n", v.Str)
		return 1
	}
	s.print(stdout, bargs, v)
	return 0
}

// piped runs the commands of a script read from stdin, like
// `redis-cli < file`: after a lost connection it reconnects for the next
// command.
func piped(s *session, stdin io.Reader, stdout io.Writer) int {
	if s.connect() != nil {
		return 1
	}
	status := 0
	err := eachLine(stdin, s.stderr, func(line []byte) error {
		switch err := s.line(line, stdout); {
		case errors.Is(err, errQuit):
			return err
		case errors.Is(err, errConnect):
			status = 1
			return err
		case err != nil: // lost, said so; the next command reconnects
			status = 1
		}
		return nil
	})
	if errors.Is(err, errRead) {
		status = 1
	}
	return status
}

// interactive prompts for commands until EOF or quit. Trouble with the
// server is printed and the next command tries again.
func interactive(s *session, stdin io.Reader, stdout io.Writer) int {
	s.connect() // a failure is printed, and the prompt says "not connected"
	prompt := func() {
		if s.nc == nil {
			io.WriteString(stdout, "not connected> ")
		} else {
			io.WriteString(stdout, s.name()+"> ")
		}
	}
	prompt()
	err := eachLine(stdin, s.stderr, func(line []byte) error {
		if err := s.line(line, stdout); errors.Is(err, errQuit) {
			return err
		}
		prompt()
		return nil
	})
	if err == nil { // EOF: end the prompt's line, as redis-cli does on Ctrl-D
		io.WriteString(stdout, "\n")
	}
	if errors.Is(err, errRead) {
		return 1
	}
	return 0
}

var (
	// errQuit means the user typed quit or exit.
	errQuit = errors.New("cli: quit")
	// errRead means stdin could not be read; the reason has been printed.
	errRead = errors.New("cli: reading stdin")
)

// eachLine calls fn with each line of r, without its newline, until EOF,
// when it returns nil, or until fn returns an error, which it returns. An
// error reading r is printed to stderr and returned as errRead.
func eachLine(r io.Reader, stderr io.Writer, fn func(line []byte) error) error {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if ferr := fn(bytes.TrimSuffix(line, []byte("\n"))); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			fmt.Fprintf(stderr, "Error reading commands: %v\n", err)
			return errRead
		}
	}
}

// line runs one line typed or piped in: splits it like redis-cli, sends it
// and prints the reply. Blank lines are skipped. It returns errQuit for quit
// and exit, and the session's errors.
func (s *session) line(line []byte, stdout io.Writer) error {
	args, err := protocol.SplitArgs(line, nil, math.MaxInt)
	switch {
	case err != nil:
		io.WriteString(stdout, "Invalid argument(s)\n")
		return nil
	case len(args) == 0:
		return nil
	case strings.EqualFold(string(args[0]), "quit"), strings.EqualFold(string(args[0]), "exit"):
		return errQuit
	}
	start := time.Now()
	v, err := s.do(args)
	if err != nil {
		return err
	}
	s.print(stdout, args, v)
	// redis-cli times slow commands when it formats for a person.
	if d := time.Since(start); d >= 500*time.Millisecond && !s.cfg.Raw {
		fmt.Fprintf(stdout, "(%.2fs)\n", d.Seconds())
	}
	return nil
}

// print writes the reply v to the command args.
func (s *session) print(w io.Writer, args [][]byte, v protocol.Value) {
	var b []byte
	switch {
	case isText(args):
		b = appendRaw(nil, v) // the text ends with its own newline
	case s.cfg.Raw:
		b = append(appendRaw(nil, v), '\n')
	default:
		b = appendTTY(nil, v, "")
	}
	w.Write(b)
}

// isText reports whether args is one of the commands whose reply redis-cli
// prints raw even to a terminal, because it is text for people to read
// (cliSendCommand in redis-cli.c, 7.0). Flint does not have all of them.
func isText(args [][]byte) bool {
	is := func(i int, name string) bool { return strings.EqualFold(string(args[i]), name) }
	n := len(args)
	switch {
	case is(0, "info"), is(0, "lolwut"):
		return true
	case n >= 2 && is(0, "debug"):
		return is(1, "htstats") || is(1, "htstats-key") || is(1, "client-eviction")
	case n >= 2 && is(0, "memory"):
		return is(1, "malloc-stats") || is(1, "doctor")
	case n == 2 && is(0, "cluster"):
		return is(1, "nodes") || is(1, "info")
	case n >= 2 && is(0, "client"):
		return is(1, "list") || is(1, "info")
	case is(0, "latency"):
		return n == 3 && is(1, "graph") || n == 2 && is(1, "doctor")
	case n >= 2 && is(0, "proxy"):
		return is(1, "info")
	}
	return false
}
