// Package testlog keeps the log of a test suite's in-process manager out of
// the test output: the log goes to a file, and only when the suite fails
// are its last lines printed, after the tests' own failures, so that a CI
// log shows which test failed first and what the manager said last.
package testlog

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// tailBytes bounds what a failed suite prints of the log.
const tailBytes = 8 << 10

// Run runs a suite (run returns its exit code) with its manager's log in
// a file, as Start and Stop keep it, and returns the exit code: a
// TestMain is os.Exit(testlog.Run("name", func() int { ... m.Run() ... })).
func Run(suite string, run func() int) int {
	log, err := Start(suite)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := run()
	log.Stop(code)
	return code
}

// Log is the manager log of one test suite.
type Log struct {
	file *os.File
}

// Start sends controller-runtime's log (info and above, stack traces only
// for panics) to a new temporary file named after suite.
func Start(suite string) (*Log, error) {
	f, err := os.CreateTemp("", "uprev-"+suite+"-manager-*.log")
	if err != nil {
		return nil, fmt.Errorf("creating the manager log: %w", err)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(f), zap.StacktraceLevel(zapcore.PanicLevel)))
	return &Log{file: f}, nil
}

// Stop ends the log after the suite ran with exit code code: on success
// the file is removed; on failure its last lines are printed to stderr
// with the file's path.
func (l *Log) Stop(code int) {
	defer func() { _ = l.file.Close() }() // writes to an *os.File are not buffered: nothing is lost
	if code == 0 {
		_ = os.Remove(l.file.Name())
		return
	}
	tail, err := lastBytes(l.file, tailBytes)
	if err != nil {
		fmt.Fprintf(os.Stderr, "reading the manager log %s: %v\n", l.file.Name(), err)
		return
	}
	fmt.Fprintf(os.Stderr, "\nthe suite failed; the last lines of the manager log (all of it: %s):\n%s\n", l.file.Name(), tail)
}

// lastBytes returns up to n bytes of the end of f, from the start of a line.
func lastBytes(f *os.File, n int64) ([]byte, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	start := max(info.Size()-n, 0)
	buf := make([]byte, info.Size()-start)
	if _, err := f.ReadAt(buf, start); err != nil && err != io.EOF {
		return nil, err
	}
	if start > 0 {
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:]
		}
	}
	return buf, nil
}
