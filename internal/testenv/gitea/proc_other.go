//go:build !linux

package gitea

import "syscall"

// sysProcAttr is the default elsewhere: Gitea is stopped by the test's
// cleanup.
func sysProcAttr() *syscall.SysProcAttr { return nil }
