package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	flintclient "github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/lineclient"
)

// client runs `flint client`, the line-protocol client: commands on stdin,
// results on stdout (see package lineclient).
func client(args []string) int {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	server := fs.String("server", "127.0.0.1:7379", "server address (host:port); may be given as the first argument instead")
	pass := fs.String("pass", "", "password to AUTH with (default: $FLINT_PASSWORD)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: flint client [host:port] [flags] < commands\n\n"+
			"Reads PUT, SWAP, GET, DELETE, SCAN and STOP commands on stdin, one per line,\n"+
			"and writes their results on stdout.\n\nflags:\n")
		fs.PrintDefaults()
	}
	addr, ok := clientArgs(fs, args)
	switch {
	case !ok:
		return 2
	case addr == "":
		addr = *server
	case isSet(fs, "server"):
		fmt.Fprintf(os.Stderr, "flint client: server address given twice (%s and --server %s)\n", addr, *server)
		return 2
	}
	if *pass == "" {
		*pass = os.Getenv("FLINT_PASSWORD")
	}
	c, err := flintclient.New(addr, flintclient.WithPassword(*pass), flintclient.WithPoolSize(1))
	if err != nil {
		hint := "is flint serve running there?"
		if _, refused := errors.AsType[*flintclient.ReplyError](err); refused {
			hint = "check --pass or $FLINT_PASSWORD"
		}
		fmt.Fprintf(os.Stderr, "flint client: cannot connect to %s (%s): %v\n", addr, hint, err)
		return 1
	}
	defer c.Close()
	if err := lineclient.Run(context.Background(), c, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "flint client: %v\n", err)
		return 1
	}
	return 0
}

// clientArgs parses flags given before and after an optional address
// argument, and returns the address ("" if none).
func clientArgs(fs *flag.FlagSet, args []string) (string, bool) {
	if fs.Parse(args) != nil {
		return "", false
	}
	if fs.NArg() == 0 {
		return "", true
	}
	addr := fs.Arg(0)
	if fs.Parse(fs.Args()[1:]) != nil {
		return "", false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "flint client: unexpected argument %q\n", fs.Arg(0))
		return "", false
	}
	return addr, true
}

func isSet(fs *flag.FlagSet, name string) (set bool) {
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
