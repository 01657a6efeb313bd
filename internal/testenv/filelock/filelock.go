// Package filelock locks files across the test processes that `go test`
// runs side by side: the ports they reserve (freeport) and the programs
// they build once for all of them (manager.Program).
package filelock
