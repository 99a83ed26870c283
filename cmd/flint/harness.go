package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flintkv/flint/internal/ask"
)

// harnessUsage describes the roles of the users' course harness, which
// starts each process with positional arguments only (docs/SHARDING.md).
const harnessUsage = `usage: flint harness <role> <arguments>

Runs Flint in one of the roles of a course harness that starts processes with positional
arguments only. Partitions and replicas count from 0; addresses are host:port.

Without replication:
  flint harness manager <listen port> <server0 address>,<server1 address>,...
  flint harness server <partition> <manager address> <listen port> <data directory>
  flint harness client <manager address>      (waits until every server is up, then as flint client)

With replication:
  flint harness manager-replica <replica> <client port> <peer port> <other managers' peer addresses | none>
      <replication factor> <all server replicas' client addresses, partition-major> <data directory>
  flint harness server-replica <partition> <replica> <manager addresses> <client port> <peer port>
      <the other replicas' peer addresses | none> <data directory>
  flint harness client <manager addresses>

Lists are comma-separated; "other" lists are in replica order, without the process's own.
Replicas share the secret in $FLINT_CLUSTER_SECRET (default "flint-harness"); every role
listens on $FLINT_HARNESS_HOST (default 127.0.0.1).
`

// harness runs `flint harness`: it turns a role's positional arguments
// into the flags of flint serve or flint client, and runs that.
func harness(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(os.Stderr, harnessUsage)
		return 2
	}
	var flags []string
	var err error
	switch role, pos := args[0], args[1:]; role {
	case "client":
		if len(pos) != 1 {
			err = fmt.Errorf("client takes <manager addresses>")
			break
		}
		if err := awaitServers(splitList(pos[0])); err != nil {
			fmt.Fprintf(os.Stderr, "flint harness: %v\n", err)
			return 1
		}
		return client([]string{pos[0]})
	case "manager":
		flags, err = managerFlags(pos)
	case "server":
		flags, err = serverFlags(pos)
	case "manager-replica":
		flags, err = managerReplicaFlags(pos)
	case "server-replica":
		flags, err = serverReplicaFlags(pos)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "flint harness: %v\n\n%s", err, harnessUsage)
		return 2
	}
	return serve(append(flags, "--huge-pages=false"))
}

// harnessSecret is the replicas' cluster secret.
func harnessSecret() string {
	if s := os.Getenv("FLINT_CLUSTER_SECRET"); s != "" {
		return s
	}
	return "flint-harness"
}

// managerFlags: <listen port> <server addresses>.
func managerFlags(pos []string) ([]string, error) {
	if len(pos) != 2 {
		return nil, fmt.Errorf("manager takes <listen port> <server addresses>")
	}
	port, err := parsePort(pos[0])
	if err != nil {
		return nil, err
	}
	return []string{"--manager", "--addr", listenAddr(port), "--servers", pos[1]}, nil
}

// serverFlags: <partition> <manager address> <listen port> <data directory>.
func serverFlags(pos []string) ([]string, error) {
	if len(pos) != 4 {
		return nil, fmt.Errorf("server takes <partition> <manager address> <listen port> <data directory>")
	}
	part, err := parseIndex("partition", pos[0])
	if err != nil {
		return nil, err
	}
	port, err := parsePort(pos[2])
	if err != nil {
		return nil, err
	}
	return []string{"--shard-group", strconv.Itoa(part + 1), "--managers", pos[1], "--addr", listenAddr(port), "--dir", pos[3]}, nil
}

// managerReplicaFlags: <replica> <client port> <peer port> <other managers'
// peer addresses | none> <replication factor> <server addresses> <dir>.
// The managers form the meta group, members 1 to n in replica order; they
// know each other by peer address alone, so each names the others' client
// address by their peer host and port 0 (a manager redirects no client to
// another: any of them answers for the map).
func managerReplicaFlags(pos []string) ([]string, error) {
	if len(pos) != 7 {
		return nil, fmt.Errorf("manager-replica takes 7 arguments, got %d", len(pos))
	}
	r, err := parseIndex("replica", pos[0])
	if err != nil {
		return nil, err
	}
	cport, err1 := parsePort(pos[1])
	pport, err2 := parsePort(pos[2])
	if _, err := strconv.Atoi(pos[4]); err != nil || err1 != nil || err2 != nil {
		return nil, fmt.Errorf("bad port or replication factor in %q %q %q", pos[1], pos[2], pos[4])
	}
	flags := []string{"--manager", "--addr", listenAddr(cport), "--servers", pos[5], "--replicas", pos[4], "--dir", pos[6]}
	if pos[3] == "none" {
		return flags, nil
	}
	members, err := replicaMembers(r, splitList(pos[3]), func(int, string) string { return "" }, cport, pport)
	if err != nil {
		return nil, err
	}
	return append(flags, "--id", strconv.Itoa(r+1), "--initial-members", members, "--cluster-name", "harness-managers",
		"--cluster-secret", harnessSecret(), "--peer-listen", listenAddr(pport)), nil
}

// serverReplicaFlags: <partition> <replica> <manager addresses> <client
// port> <peer port> <the other replicas' peer addresses | none> <dir>. The
// replicas' client addresses come from the managers' map, which the
// process waits for.
func serverReplicaFlags(pos []string) ([]string, error) {
	if len(pos) != 7 {
		return nil, fmt.Errorf("server-replica takes 7 arguments, got %d", len(pos))
	}
	part, err := parseIndex("partition", pos[0])
	if err != nil {
		return nil, err
	}
	r, err := parseIndex("replica", pos[1])
	if err != nil {
		return nil, err
	}
	cport, err1 := parsePort(pos[3])
	pport, err2 := parsePort(pos[4])
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("bad port in %q %q", pos[3], pos[4])
	}
	flags := []string{"--shard-group", strconv.Itoa(part + 1), "--managers", pos[2], "--addr", listenAddr(cport), "--dir", pos[6]}
	if pos[5] == "none" {
		return flags, nil
	}
	clients, err := groupClients(splitList(pos[2]), uint64(part+1))
	if err != nil {
		return nil, err
	}
	members, err := replicaMembers(r, splitList(pos[5]), func(i int, peer string) string {
		if i < len(clients) {
			return clients[i]
		}
		return ""
	}, cport, pport)
	if err != nil {
		return nil, err
	}
	return append(flags, "--id", strconv.Itoa(r+1), "--initial-members", members,
		"--cluster-name", fmt.Sprintf("harness-partition-%d", part), "--cluster-secret", harnessSecret(),
		"--peer-listen", listenAddr(pport)), nil
}

// replicaMembers returns the --initial-members list of a group whose
// replica r has ports cport and pport and whose other replicas have the
// peer addresses others, in replica order. client(i, peer) is replica i's
// client address, or "" to name it by its peer host and port 0.
func replicaMembers(r int, others []string, client func(i int, peer string) string, cport, pport int) (string, error) {
	if r > len(others) {
		return "", fmt.Errorf("replica %d of a group of %d", r, len(others)+1)
	}
	host := "127.0.0.1"
	if len(others) > 0 {
		if h, _, err := net.SplitHostPort(others[0]); err == nil {
			host = h
		}
	}
	peers := append(append(append([]string{}, others[:r]...), net.JoinHostPort(host, strconv.Itoa(pport))), others[r:]...)
	var list []string
	for i, peer := range peers {
		h, _, err := net.SplitHostPort(peer)
		if err != nil {
			return "", fmt.Errorf("bad peer address %q: %v", peer, err)
		}
		c := client(i, peer)
		switch {
		case i == r:
			c = net.JoinHostPort(h, strconv.Itoa(cport))
		case c == "":
			c = net.JoinHostPort(h, "0")
		}
		list = append(list, fmt.Sprintf("%d=%s@%s", i+1, c, peer))
	}
	return strings.Join(list, ","), nil
}

// groupClients asks the managers for the map, until one answers, and
// returns the client addresses of group g's members in member order.
func groupClients(managers []string, g uint64) ([]string, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for i := 0; ; i++ {
		m, _, _, err := ask.Map(ctx, managers[i%len(managers)], os.Getenv("FLINT_PASSWORD"))
		if err == nil {
			grp := m.Group(g)
			if grp == nil {
				return nil, fmt.Errorf("the managers' map has no partition %d", g-1)
			}
			var addrs []string
			for _, mb := range grp.Members {
				addrs = append(addrs, mb.Addr)
			}
			return addrs, nil
		}
		if i%20 == 0 {
			fmt.Fprintf(os.Stderr, "flint harness: waiting for a manager's map: %v\n", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// awaitServers waits until a manager says that every data group has a
// leader (CLUSTER INFO's cluster_state:ok), so that a client's first
// answer waits for the manager and every server to be up, as the harness
// expects; it says once on stderr that it waits. It returns an error only
// on SIGINT or SIGTERM.
func awaitServers(managers []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	password := os.Getenv("FLINT_PASSWORD")
	for i := 0; ; i++ {
		v, err := ask.One(ctx, managers[i%len(managers)], password, "CLUSTER", "INFO")
		if err == nil && strings.Contains(string(v.Str), "cluster_state:ok\r\n") {
			return nil
		}
		if i == len(managers) {
			fmt.Fprintf(os.Stderr, "flint harness: waiting for the managers and every server (%v)\n", cmp.Or(err, errors.New("cluster_state is not ok")))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// listenAddr is where a role listens on port: on $FLINT_HARNESS_HOST, by
// default 127.0.0.1 (loopback, as the harness's tests run).
func listenAddr(port int) string {
	host := os.Getenv("FLINT_HARNESS_HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p <= 0 || p > 65535 {
		return 0, fmt.Errorf("bad port %q", s)
	}
	return p, nil
}

func parseIndex(what, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad %s %q: want a number from 0", what, s)
	}
	return n, nil
}
