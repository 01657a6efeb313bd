//go:build !unix

package freeport

import "os"

// lock opens path. Without flock, reservations are kept within this
// process only.
func lock(path string) (f *os.File, ok bool, err error) {
	f, err = os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	return f, err == nil, err
}
