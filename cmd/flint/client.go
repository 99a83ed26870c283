package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"

	flintclient "github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/lineclient"
)

// client runs `flint client`, the line-protocol client: commands on stdin,
// results on stdout (see package lineclient).
func client(args []string) int {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	server := fs.String("server", "127.0.0.1:7379", "server addresses (host:port, comma-separated); may be given as arguments instead")
	pass := fs.String("pass", "", "password to AUTH with (default: $FLINT_PASSWORD)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: flint client [host:port[,host:port...]]... [flags] < commands\n\n"+
			"Reads PUT, SWAP, GET, DELETE, SCAN and STOP commands on stdin, one per line,\n"+
			"and writes their results on stdout. Given the addresses of several members of\n"+
			"a cluster, it follows the leader; while no server answers, it waits and retries.\n\nflags:\n")
		fs.PrintDefaults()
	}
	addrs, ok := clientArgs(fs, args)
	if !ok {
		return 2
	}
	if len(addrs) == 0 {
		var err error
		if addrs, err = splitAddrs(*server); err != nil {
			badUsage("%v", err)
			return 2
		}
	}
	if *pass == "" {
		*pass = os.Getenv("FLINT_PASSWORD")
	}
	ctx := context.Background()
	c, err := lineclient.Connect(ctx, addrs, os.Stderr, flintclient.WithPassword(*pass), flintclient.WithPoolSize(1))
	if err != nil {
		fmt.Fprintf(os.Stderr, "flint client: cannot connect to %s (check --pass or $FLINT_PASSWORD): %v\n", strings.Join(addrs, ","), err)
		return 1
	}
	defer c.Close()
	if err := lineclient.Run(ctx, c, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "flint client: %v\n", err)
		return 1
	}
	return 0
}

// clientArgs parses flags given before, between and after address
// arguments, and returns the addresses (none if none were given). It
// refuses addresses given both as arguments and with --server.
func clientArgs(fs *flag.FlagSet, args []string) ([]string, bool) {
	pos, ok := parseInterspersed(fs, args)
	if !ok {
		return nil, false
	}
	var addrs []string
	for _, p := range pos {
		more, err := splitAddrs(p)
		if err != nil {
			badUsage("%v", err)
			return nil, false
		}
		addrs = append(addrs, more...)
	}
	if len(addrs) > 0 && isSet(fs, "server") {
		badUsage("server addresses given twice (%s and --server %s)", strings.Join(addrs, ","), fs.Lookup("server").Value)
		return nil, false
	}
	return addrs, true
}

// splitAddrs splits a comma-separated list of host:port addresses.
func splitAddrs(list string) ([]string, error) {
	addrs := strings.Split(list, ",")
	for _, a := range addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, fmt.Errorf("bad server address %q: want host:port", a)
		}
	}
	return addrs, nil
}

// badUsage says on stderr what is wrong with the command line, and how to
// use it.
func badUsage(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "flint client: "+format+"\n", args...)
	fmt.Fprintln(os.Stderr, "usage: flint client [host:port[,host:port...]]... [flags] < commands (more: flint client --help)")
}

func isSet(fs *flag.FlagSet, name string) (set bool) {
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
