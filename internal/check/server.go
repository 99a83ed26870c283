package check

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// server is a `flint serve` process that the checker started, to kill,
// pause and restart. Its address and data directory stay the same across
// restarts, and its output from every run is appended to one log.
//
// One goroutine at a time drives it: Run before and after the workload,
// the nemesis during it.
type server struct {
	bin  string
	args []string // serve's, --addr and --dir included
	env  []string
	addr string
	log  string // path of the log

	proc *process // the current process
	// held are listeners on the server's addresses, kept from when they
	// were picked until its first start, so that nothing else in this
	// process (another member's relay, say) takes the ports meanwhile.
	held []net.Listener
}

// process is one run of the server's binary.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited
	err    error         // why it exited; read after exited is closed
}

// How long a server may take to accept connections after it starts (a
// restart replays its log), and to exit after SIGTERM; and how long it
// waits, after SIGTERM, for its clients' commands to finish
// (--shutdown-timeout), well within stopTimeout: a member stopped after
// the others may hold writes that can no longer commit.
const (
	startTimeout     = 30 * time.Second
	stopTimeout      = 10 * time.Second
	shutdownDeadline = "3s"
)

// newServer returns the server `bin serve` listening on addr, with its
// data in dir/data and its log in dir/serve.log, not yet started.
func newServer(bin, dir, addr string, extra, env []string) *server {
	return &server{
		bin:  bin,
		args: append([]string{"serve", "--addr", addr, "--dir", filepath.Join(dir, "data"), "--shutdown-timeout", shutdownDeadline}, extra...),
		env:  append(os.Environ(), env...),
		addr: addr,
		log:  filepath.Join(dir, "serve.log"),
	}
}

// holdAddr listens on a free port of 127.0.0.1, to hand over later.
func holdAddr() (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("%w: finding a free port: %w", ErrServer, err)
	}
	return ln, nil
}

// start runs the server and waits until it accepts connections.
func (s *server) start() error {
	for _, ln := range s.held {
		ln.Close()
	}
	s.held = nil
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrServer, err)
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr, cmd.Env = logf, logf, s.env
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: starting %s: %w", ErrServer, s.bin, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	s.proc = p
	for deadline := time.Now().Add(startTimeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		select {
		case <-p.exited:
			return fmt.Errorf("%w: flint serve exited at start: %v; its log ends:\n%s", ErrServer, p.err, s.logTail())
		default:
		}
		if c, err := net.DialTimeout("tcp", s.addr, time.Second); err == nil {
			c.Close()
			return nil
		}
	}
	return fmt.Errorf("%w: flint serve did not accept connections on %s within %v; its log ends:\n%s", ErrServer, s.addr, startTimeout, s.logTail())
}

// kill kills the server with SIGKILL and waits until it is gone.
func (s *server) kill() error {
	if err := s.proc.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%w: kill: %w", ErrServer, err)
	}
	<-s.proc.exited
	return nil
}

// pause stops the server with SIGSTOP; resume continues it with SIGCONT.
func (s *server) pause() error  { return s.signal(syscall.SIGSTOP) }
func (s *server) resume() error { return s.signal(syscall.SIGCONT) }

func (s *server) signal(sig os.Signal) error {
	if err := s.proc.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%w: %v: %w", ErrServer, sig, err)
	}
	return nil
}

// exited returns an error if the server exited without being killed.
func (s *server) exited() error {
	select {
	case <-s.proc.exited:
		return fmt.Errorf("%w: flint serve exited on its own: %v; its log ends:\n%s", ErrServer, s.proc.err, s.logTail())
	default:
		return nil
	}
}

// stop ends the server: SIGCONT in case it is paused, then SIGTERM, and
// SIGKILL if it has not exited within stopTimeout.
func (s *server) stop() error {
	if err := s.exited(); err != nil {
		return err
	}
	s.proc.cmd.Process.Signal(syscall.SIGCONT)
	s.proc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.proc.exited:
	case <-time.After(stopTimeout):
		s.kill()
		return fmt.Errorf("%w: flint serve did not exit within %v of SIGTERM; killed it", ErrServer, stopTimeout)
	}
	if s.proc.err != nil {
		return fmt.Errorf("%w: flint serve exited after SIGTERM: %v; its log ends:\n%s", ErrServer, s.proc.err, s.logTail())
	}
	return nil
}

// logTail returns the end of the server's log.
func (s *server) logTail() string {
	f, err := os.Open(s.log)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > 4096 {
		f.Seek(-4096, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return string(bytes.TrimSpace(b))
}
