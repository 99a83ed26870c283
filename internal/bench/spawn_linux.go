package bench

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel send SIGTERM to cmd when this process
// dies, so that a driver killed before it could stop its server (by
// SIGKILL, or SIGPIPE on a closed stdout) does not leave it running.
// Strictly, the signal follows the death of the thread that started cmd;
// Go ends threads only when a goroutine locked to one exits, which this
// package never does.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
