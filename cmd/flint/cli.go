package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	flintcli "github.com/flintkv/flint/internal/cli"
)

// cli runs `flint cli`.
func cli(args []string) int {
	cfg := flintcli.Config{}
	fs := flag.NewFlagSet("cli", flag.ContinueOnError)
	fs.StringVar(&cfg.Host, "host", flintcli.DefaultHost, "server host")
	fs.IntVar(&cfg.Port, "port", flintcli.DefaultPort, "server port")
	fs.StringVar(&cfg.Password, "pass", "", "password to send with AUTH after connecting (default: $FLINT_PASSWORD)")
	// The last of --raw and --no-raw wins, as in redis-cli.
	var raw *bool
	fs.BoolFunc("raw", "print replies raw, even to a terminal", func(string) error { raw = ptr(true); return nil })
	fs.BoolFunc("no-raw", "print replies formatted, even when stdout is not a terminal", func(string) error { raw = ptr(false); return nil })
	fs.BoolVar(&cfg.RESP3, "3", false, "speak RESP3: send HELLO 3 after connecting")
	fs.BoolVar(&cfg.RESP3, "resp3", false, "same as -3")
	fs.BoolVar(&cfg.ErrExit, "e", false, "exit with status 1, printing the error to stderr, when the reply to a\ncommand given as arguments is an error (without it the status is 0, as in redis-cli)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), cliUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if cfg.Password == "" {
		cfg.Password = os.Getenv("FLINT_PASSWORD")
	}
	cfg.Raw = !flintcli.IsTerminal(os.Stdout)
	if raw != nil {
		cfg.Raw = *raw
	}
	cfg.Interactive = fs.NArg() == 0 && flintcli.IsTerminal(os.Stdin)
	return flintcli.Run(cfg, fs.Args(), os.Stdin, os.Stdout, os.Stderr)
}

func ptr[T any](v T) *T { return &v }

const cliUsage = `usage: flint cli [flags] [command [arg ...]]

Talks to a Flint server the way redis-cli does.

With a command, sends it, prints the reply and exits. Without one, reads
commands from stdin, one a line: with a prompt when stdin is a terminal
(quit or exit leaves; a lost connection is retried with the next command),
else like redis-cli < file. Words split as in redis-cli: "double quotes"
take \n \r \t \" \\ \xHH escapes, 'single quotes' only \'.

Replies print as redis-cli prints them: formatted ("value", (integer) 1,
(nil), 1) ...) when stdout is a terminal, raw (bare values, one a line)
when not, unless --raw or --no-raw says otherwise. Flags go before the
command.

flags:
`
