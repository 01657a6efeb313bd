// Package freeport gives tests loopback addresses for servers they start
// as separate processes (Gitea, the manager's metrics, health and webhook
// listeners), which must be told their address before they listen.
//
// A port found free by listening on port 0 and closing is free only for a
// moment: the kernel hands the same ephemeral ports to other sockets,
// listening or connecting, of every process on the machine, and one can
// take it before the server binds it (CI saw Gitea fail with "address
// already in use"). So the ports given here are outside the kernel's
// ephemeral range, which it never hands out on its own, and each is locked
// for the life of the test process, so that two test processes running
// side by side never pick the same one.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/uprev-dev/uprev/internal/testenv/filelock"
)

// lowestPort is the lowest port handed out: below it lie the well-known
// and commonly configured service ports.
const lowestPort = 20000

var (
	mu sync.Mutex
	// held keeps each reservation's lock file open, and so locked, until
	// the process exits.
	held = map[int]*os.File{}
)

// Addr returns "127.0.0.1:<port>" with a port reserved for this test
// process, failing the test when none is left.
func Addr(t testing.TB) string {
	t.Helper()
	addr, err := Reserve()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Reserve returns "127.0.0.1:<port>" with a port that is free now, outside
// the kernel's ephemeral range, and not reserved by any other process that
// uses this package until this process exits.
func Reserve() (string, error) {
	lo, hi := candidates()
	dir := filepath.Join(os.TempDir(), "uprev-test-ports")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("reserving a port: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	n := hi - lo + 1
	start := rand.IntN(n)
	for i := range n {
		port := lo + (start+i)%n
		if _, mine := held[port]; mine {
			continue
		}
		f, ok, err := filelock.TryLock(filepath.Join(dir, strconv.Itoa(port)))
		if err != nil {
			return "", fmt.Errorf("reserving a port: %w", err)
		}
		if !ok {
			continue // another test process holds it
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			_ = f.Close() // in use by something else on the machine
			continue
		}
		_ = l.Close() // free: the lock keeps it ours
		held[port] = f
		return addr, nil
	}
	return "", fmt.Errorf("no free port of 127.0.0.1 between %d and %d", lo, hi)
}

// candidates returns the range of ports to choose from: below the kernel's
// ephemeral range when there is room there, else above it.
func candidates() (lo, hi int) {
	ephemeralLo, ephemeralHi := ephemeralRange()
	if ephemeralLo-lowestPort >= 1000 {
		return lowestPort, ephemeralLo - 1
	}
	return ephemeralHi + 1, 65535
}

// ephemeralRange reads the range of ports Linux gives to sockets bound to
// port 0 and to outgoing connections; elsewhere, or when it cannot be
// read, it assumes Linux's default, which also lies above the ports
// handed out on macOS's default range.
func ephemeralRange() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 {
			l, errL := strconv.Atoi(f[0])
			h, errH := strconv.Atoi(f[1])
			if errL == nil && errH == nil && l <= h {
				return l, h
			}
		}
	}
	return 32768, 60999
}
