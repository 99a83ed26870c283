package server

import (
	"net"

	"golang.org/x/sys/unix"
)

// unsent returns how many bytes written to tc, FIN included, the peer has
// not acknowledged yet (SIOCOUTQ).
func unsent(tc *net.TCPConn) (int, error) {
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil {
		return 0, err
	}
	return n, ierr
}
