// Command flint is Flint's single binary: the server, its clients and tools.
package main

import (
	"flag"
	"fmt"
	"os"
)

// subcommands maps each subcommand to its entry point, which gets the
// arguments after the subcommand's name and returns the exit status.
var subcommands = map[string]func(args []string) int{
	"serve":   serve,
	"cli":     cli,
	"client":  client,
	"bench":   benchCmd,
	"check":   checkCmd,
	"cluster": clusterCmd,
	"harness": harness,
}

const usage = `usage: flint <command> [flags]

commands:
  serve    run a server
  cli      interactive command line, like redis-cli
  client   line-protocol client (PUT/SWAP/GET/DELETE/SCAN/STOP on stdin)
  bench    benchmark a server with the YCSB and cs6450 workloads
  check    check a server for linearizability violations and lost writes, under faults
  cluster  run a replicated group on this machine (up); show and change a group's members
           (status, add, remove, transfer)
  harness  run as a manager, server or client of the course harness's sharded deployments

Run 'flint <command> --help' for the flags of a command.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	run, ok := subcommands[os.Args[1]]
	if !ok {
		if os.Args[1] != "help" && os.Args[1] != "-h" && os.Args[1] != "--help" {
			fmt.Fprintf(os.Stderr, "flint: unknown command %q\n\n", os.Args[1])
		}
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	os.Exit(run(os.Args[2:]))
}

// parseFlags parses the flags of a subcommand that takes no other
// arguments. It returns false, having said why on stderr, for bad usage.
func parseFlags(fs *flag.FlagSet, args []string) bool {
	if err := fs.Parse(args); err != nil {
		return false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "flint %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return false
	}
	return true
}

// parseInterspersed parses the flags of a subcommand given before, between
// and after its positional arguments, and returns those. It returns false,
// having said why on stderr, for bad usage.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, bool) {
	var pos []string
	for {
		if fs.Parse(args) != nil {
			return nil, false
		}
		if fs.NArg() == 0 {
			return pos, true
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
}
