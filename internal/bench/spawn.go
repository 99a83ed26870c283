package bench

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// spawned is a `flint serve` this session started, with its own data
// directory, which is removed when it stops.
type spawned struct {
	cmd    *exec.Cmd
	dir    string
	addr   string
	exited chan struct{} // closed when the process has exited
	err    error         // why it exited; read after exited is closed
}

// How long a spawned server may take to listen, and to stop gracefully.
const (
	spawnStartTimeout = 10 * time.Second
	spawnStopTimeout  = 10 * time.Second
)

// spawnFlint starts `flint serve` from the running binary on a free port of
// 127.0.0.1, in a fresh temporary directory (also passed as --dir if serve
// has that flag), and waits until it accepts connections. extra are more
// flags for serve.
func spawnFlint(extra []string) (*spawned, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("%w: finding this binary: %w", ErrSpawn, err)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "flint-bench-")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSpawn, err)
	}
	args := []string{"serve", "--addr", addr}
	if serveHasFlag(exe, "dir") {
		args = append(args, "--dir", dir)
	}
	s, err := startServe(exe, dir, addr, append(args, extra...))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// startServe runs exe with args in dir and waits for it to listen on addr.
// Its output goes to serve.log in dir.
func startServe(exe, dir, addr string, args []string) (*spawned, error) {
	logf, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSpawn, err)
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(exe, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logf, logf
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSpawn, err)
	}
	s := &spawned{cmd: cmd, dir: dir, addr: addr, exited: make(chan struct{})}
	go func() { s.err = cmd.Wait(); close(s.exited) }()
	if err := s.waitListening(); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// waitListening dials addr until it answers, the process exits or
// spawnStartTimeout passes.
func (s *spawned) waitListening() error {
	deadline := time.Now().Add(spawnStartTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("%w: flint serve exited: %v; its log:\n%s", ErrSpawn, s.err, s.log())
		default:
		}
		if c, err := net.DialTimeout("tcp", s.addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%w: flint serve did not listen on %s within %v; its log:\n%s", ErrSpawn, s.addr, spawnStartTimeout, s.log())
}

// stop sends SIGTERM, kills the server if it has not exited within
// spawnStopTimeout, and removes its directory.
func (s *spawned) stop() error {
	defer os.RemoveAll(s.dir)
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(spawnStopTimeout):
		s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("%w: flint serve did not stop within %v of SIGTERM; killed it", ErrSpawn, spawnStopTimeout)
	}
	if s.err != nil {
		return fmt.Errorf("%w: flint serve exited: %w; its log:\n%s", ErrSpawn, s.err, s.log())
	}
	return nil
}

// log returns the server's output so far.
func (s *spawned) log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "serve.log"))
	return string(bytes.TrimSpace(b))
}

// freeAddr returns 127.0.0.1 and a port that was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("%w: finding a free port: %w", ErrSpawn, err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// serveHasFlag reports whether `exe serve --help` lists the flag name.
func serveHasFlag(exe, name string) bool {
	out, _ := exec.Command(exe, "serve", "--help").CombinedOutput()
	return strings.Contains(string(out), "\n  -"+name+" ") || strings.Contains(string(out), "\n  -"+name+"\n")
}
