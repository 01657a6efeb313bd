//go:build !unix

package filelock

import "os"

// TryLock opens path. Without flock, nothing is locked across processes.
func TryLock(path string) (f *os.File, ok bool, err error) {
	f, err = os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	return f, err == nil, err
}

// Lock opens path. Without flock, nothing is locked across processes.
func Lock(path string) (*os.File, error) {
	f, _, err := TryLock(path)
	return f, err
}
