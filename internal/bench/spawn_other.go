//go:build !linux

package bench

import "os/exec"

// dieWithParent does nothing where Linux's parent-death signal is missing:
// a driver killed before it could stop its server leaves it running.
func dieWithParent(*exec.Cmd) {}
