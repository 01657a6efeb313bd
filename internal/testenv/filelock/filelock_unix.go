//go:build unix

package filelock

import (
	"errors"
	"os"
	"syscall"
)

// TryLock opens path and takes an exclusive lock on it without waiting. It
// returns ok false when another open file holds the lock. The lock lasts
// until f is closed or the process ends.
func TryLock(path string) (f *os.File, ok bool, err error) {
	return lock(path, syscall.LOCK_NB)
}

// Lock opens path and takes an exclusive lock on it, waiting for whoever
// holds it. The lock lasts until f is closed or the process ends.
func Lock(path string) (*os.File, error) {
	f, _, err := lock(path, 0)
	return f, err
}

// lock opens path and flocks it exclusively with the extra flags.
func lock(path string, flags int) (f *os.File, ok bool, err error) {
	f, err = os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|flags); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return f, true, nil
}
