// Command failover measures how long a replicated group takes to
// acknowledge a write again after its leader is killed: it runs a group of
// `flint serve` processes on loopback with the default raft settings,
// writes through Flint's Go client without pause, kills the leader with
// SIGKILL, and times the first write acknowledged after the kill; then it
// restarts the killed member, waits until it follows again, and repeats.
//
//	go run ./scripts/failover -bin bin/flint -members 3 -kills 20
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flintkv/flint/client"
)

func main() {
	bin := flag.String("bin", "bin/flint", "the flint binary")
	n := flag.Int("members", 3, "members of the group")
	kills := flag.Int("kills", 20, "leaders to kill")
	flag.Parse()
	if err := run(*bin, *n, *kills); err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		os.Exit(1)
	}
}

type member struct {
	addr, dir string
	cmd       *exec.Cmd
}

func run(bin string, n, kills int) error {
	root, err := os.MkdirTemp("", "failover")
	if err != nil {
		return err
	}
	if os.Getenv("FAILOVER_KEEP") == "" {
		defer os.RemoveAll(root)
	} else {
		fmt.Println("logs in", root)
	}
	ms, list := make([]*member, n), make([]string, n)
	for i := range ms {
		ms[i] = &member{addr: freeAddr(), dir: filepath.Join(root, fmt.Sprint("m", i+1))}
		list[i] = fmt.Sprintf("%d=%s@%s", i+1, ms[i].addr, freeAddr())
	}
	start := func(i int) error {
		c := exec.Command(bin, "serve", "--id", fmt.Sprint(i+1), "--initial-members", strings.Join(list, ","),
			"--cluster-secret", "failover", "--dir", ms[i].dir)
		f, err := os.OpenFile(ms[i].dir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		c.Stderr = f
		ms[i].cmd = c
		return c.Start()
	}
	for i := range ms {
		if err := start(i); err != nil {
			return err
		}
	}
	defer func() {
		for _, m := range ms {
			m.cmd.Process.Kill()
			m.cmd.Wait()
		}
	}()
	addrs := make([]string, n)
	for i, m := range ms {
		addrs[i] = m.addr
	}
	var c *client.Client
	for deadline := time.Now().Add(time.Minute); c == nil; time.Sleep(20 * time.Millisecond) {
		if c, err = client.New(addrs[0], client.WithSeeds(addrs[1:]...)); err != nil && time.Now().After(deadline) {
			return err
		}
	}
	defer c.Close()
	var took []time.Duration
	for k := range kills {
		if err := write(c, k, time.Minute); err != nil { // a leader is elected and takes writes
			return err
		}
		lead, err := leader(ms)
		if err != nil {
			return err
		}
		ms[lead].cmd.Process.Signal(syscall.SIGKILL)
		killed := time.Now()
		ms[lead].cmd.Wait()
		if err := write(c, k, time.Minute); err != nil {
			return err
		}
		took = append(took, time.Since(killed))
		fmt.Printf("kill %d: member %d; first write acknowledged %v after\n", k+1, lead+1, took[k].Round(time.Millisecond))
		if err := start(lead); err != nil {
			return err
		}
		if err := following(ms[lead].addr); err != nil {
			return err
		}
	}
	slices.Sort(took)
	fmt.Printf("%d kills: median %v, max %v, min %v\n", len(took), took[len(took)/2].Round(time.Millisecond),
		took[len(took)-1].Round(time.Millisecond), took[0].Round(time.Millisecond))
	return nil
}

// write sets a key, retrying (the client follows MOVED and retries
// refusals) until it is acknowledged or d passes.
func write(c *client.Client, k int, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		err := c.Set(ctx, fmt.Sprint("k", k), []byte("v"))
		if err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

// leader returns the member whose ROLE says master.
func leader(ms []*member) (int, error) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for i, m := range ms {
			if role(m.addr) == "master" {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("no leader within a minute")
}

// following waits until the member at addr says it is a replica.
func following(addr string) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if role(addr) == "slave" {
			return nil
		}
	}
	return fmt.Errorf("%s did not follow within a minute", addr)
}

// role returns the first element of the member's own ROLE reply, or "".
// (Flint's client would send ROLE to the leader it finds.)
func role(addr string) string {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	v, err := c.Do(ctx, "role").Slice()
	if err != nil || len(v) == 0 {
		return ""
	}
	s, _ := v[0].(string)
	return s
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
