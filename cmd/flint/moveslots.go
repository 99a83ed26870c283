package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/flintkv/flint/internal/clusterctl"
	"github.com/flintkv/flint/internal/slot"
)

// moveSlotsCmd runs `flint cluster move-slots --addr MANAGERS --slots a-b --to GROUP`.
func moveSlotsCmd(args []string) int {
	fs := flag.NewFlagSet("cluster move-slots", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:7379", "client addresses of the cluster's managers (host:port, comma-separated)")
	slots := fs.String("slots", "", "the slots to move: first-last (both included), or one slot")
	to := fs.Uint64("to", 0, "the id of the group that is to own them")
	pass := fs.String("pass", "", "password to AUTH with (default: $FLINT_PASSWORD)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long (run the command again to resume)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: flint cluster move-slots --addr MANAGERS --slots first-last --to GROUP\n\n"+
			"Moves the slots to the group while the cluster serves: their keys and the groups' client\n"+
			"sessions are copied, then the map gives the slots to the group. A move left half done\n"+
			"(by a crash, or this command stopped) is finished by running it again. Prints the\n"+
			"cluster's status once done.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if !parseFlags(fs, args) {
		return 2
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "flint cluster move-slots: %s\n", fmt.Sprintf(format, a...))
		fs.Usage()
		return 2
	}
	first, last, err := parseSlots(*slots)
	if err != nil {
		return usageErr("--slots: %v", err)
	}
	if *to == 0 {
		return usageErr("--to: want a group id")
	}
	addrs, err := splitAddrs(*addr)
	if err != nil {
		return usageErr("--addr: %v", err)
	}
	if *pass == "" {
		*pass = os.Getenv("FLINT_PASSWORD")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	g, err := clusterctl.Dial(clusterctl.Config{Addrs: addrs, Password: *pass})
	if err == nil {
		err = g.MoveSlots(ctx, first, last, *to)
	}
	if err == nil {
		var sh clusterctl.Shards
		if sh, err = g.ShardStatus(ctx); err == nil {
			fmt.Printf("slots %d-%d belong to group %d\n\n", first, last, *to)
			err = sh.Write(os.Stdout)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "flint cluster move-slots: %v\n", err)
		return 1
	}
	return 0
}

// parseSlots parses "first-last" or "slot".
func parseSlots(s string) (first, last int, err error) {
	a, b, dash := strings.Cut(s, "-")
	if first, err = strconv.Atoi(a); err == nil {
		last = first
		if dash {
			last, err = strconv.Atoi(b)
		}
	}
	if err != nil || first < 0 || first > last || last >= slot.Count {
		return 0, 0, fmt.Errorf("bad slots %q: want first-last, 0 <= first <= last <= %d", s, slot.Count-1)
	}
	return first, last, nil
}
