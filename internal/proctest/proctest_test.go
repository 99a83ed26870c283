package proctest

import (
	"net"
	"os/exec"
	"testing"
	"time"
)

func TestExited(t *testing.T) {
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	if exited(cmd.Process.Pid) {
		t.Fatal("a running process reported as exited")
	}
	cmd.Process.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for !exited(cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatal("a killed process never reported as exited")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Wait()
}

// TestAwaitTakenAddr checks that a server whose address another process
// holds does not count as started, although connections there succeed, and
// that one that exits because the address is in use says so.
func TestAwaitTakenAddr(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := &Server{Addr: ln.Addr().String(), Logs: &Buffer{}, Cmd: exec.Command("sleep", "10")}
	if err := s.Cmd.Start(); err != nil {
		t.Skip(err)
	}
	sleeper := s.Cmd
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	if err := s.await(300 * time.Millisecond); err == nil {
		t.Fatal("await: a process that does not listen counted as started because another one does")
	}

	msg := `time=2026-11-23T02:58:04.306Z level=ERROR msg="server failed" err="listen tcp 127.0.0.1:1: bind: address already in use"`
	s = &Server{Addr: ln.Addr().String(), Logs: &Buffer{}, Cmd: exec.Command("sh", "-c", "echo '"+msg+"' >&2; exit 1")}
	s.Cmd.Stderr = s.Logs
	if err := s.Cmd.Start(); err != nil {
		t.Skip(err)
	}
	if err := s.await(10 * time.Second); err == nil || s.Cmd.ProcessState == nil {
		t.Fatalf("await of a process that exits: %v, state %v; want an error and the process reaped", err, s.Cmd.ProcessState)
	}
	if !AddrInUse(s.Logs.String()) {
		t.Fatalf("AddrInUse(%q) = false", s.Logs.String())
	}
}
