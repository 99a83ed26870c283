package procnet

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestListens checks Listens against listeners of this process, one of
// them closed, a process that listens on nothing, and an address where
// only a connection is.
func TestListens(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if ok, err := Listens(os.Getpid(), addr); !ok {
		t.Fatalf("Listens(this process, %s) = false (%v); want true", addr, err)
	}
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr2 := ln2.Addr().String()
	if ok, err := Listens(os.Getpid(), addr, addr2); !ok {
		t.Fatalf("Listens(this process, %s, %s) = false (%v); want true", addr, addr2, err)
	}
	ln2.Close()
	if ok, err := Listens(os.Getpid(), addr, addr2); ok || err == nil || !strings.Contains(err.Error(), addr2) {
		t.Fatalf("Listens(this process, %s, %s) with the second closed = %v, %v; want false, naming it", addr, addr2, ok, err)
	}
	other := exec.Command("sleep", "10")
	if err := other.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	if ok, _ := Listens(other.Process.Pid, addr); ok {
		t.Fatalf("Listens(a sleeping process, %s) = true; want false", addr)
	}
	// A connection accepted on addr has addr as its local address too,
	// but does not listen.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	ln.Close()
	if ok, _ := Listens(os.Getpid(), addr); ok {
		t.Fatalf("Listens(this process, %s) with the listener closed and a connection accepted there = true; want false", addr)
	}
	if _, err := Listens(os.Getpid(), "[::1]:80"); err == nil {
		t.Fatal("Listens on an IPv6 address: no error")
	}
}
