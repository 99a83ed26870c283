// Package procnet tells whether a process listens on TCP addresses, from
// Linux's /proc: for tools and tests that start servers as processes on
// ports picked free a moment before, which another process may have taken
// since (a connection there then succeeds, to the wrong process).
package procnet

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// Listens reports whether process pid holds a socket listening on each of
// addrs, IPv4 "host:port"s: a socket in the LISTEN state on the address in
// /proc/net/tcp whose inode is one of pid's open files. If not, the error
// names the first address it does not listen on, and says whether nothing
// or another process does. It reads /proc/net/tcp once, whatever the
// number of addrs.
func Listens(pid int, addrs ...string) (bool, error) {
	locals := make([]string, len(addrs))
	for i, addr := range addrs {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil || !ap.Addr().Is4() {
			return false, fmt.Errorf("procnet: %q is not an IPv4 host:port", addr)
		}
		a := ap.Addr().As4()
		// /proc/net/tcp: "sl local_address rem_address st ... uid timeout
		// inode", the address as the kernel's 32-bit word, in hex, read in
		// host order.
		locals[i] = fmt.Sprintf("%08X:%04X", binary.NativeEndian.Uint32(a[:]), ap.Port())
	}
	listening, err := listeners()
	if err != nil {
		return false, err
	}
	ours, err := sockets(pid)
	if err != nil {
		return false, err
	}
	for i, local := range locals {
		switch inodes := listening[local]; {
		case len(inodes) == 0:
			return false, fmt.Errorf("nothing listens on %s", addrs[i])
		case !ownsAny(ours, inodes):
			return false, fmt.Errorf("another process listens on %s", addrs[i])
		}
	}
	return true, nil
}

// listeners returns the inodes of the sockets in the LISTEN state, by
// local address as /proc/net/tcp writes it.
func listeners() (map[string][]string, error) {
	table, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return nil, err
	}
	inodes := map[string][]string{}
	for _, line := range strings.Split(string(table), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 9 && f[3] == "0A" { // 0A: TCP_LISTEN
			inodes[f[1]] = append(inodes[f[1]], f[9])
		}
	}
	return inodes, nil
}

// sockets returns the inodes of the sockets that process pid holds open.
func sockets(pid int) (map[string]bool, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	ours := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(dir, fd.Name()))
		if inode, ok := strings.CutPrefix(target, "socket:["); err == nil && ok {
			ours[strings.TrimSuffix(inode, "]")] = true
		}
	}
	return ours, nil
}

func ownsAny(ours map[string]bool, inodes []string) bool {
	for _, in := range inodes {
		if ours[in] {
			return true
		}
	}
	return false
}
