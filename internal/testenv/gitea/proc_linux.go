package gitea

import "syscall"

// sysProcAttr kills Gitea when the test process dies, so that an aborted
// test leaves no server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
