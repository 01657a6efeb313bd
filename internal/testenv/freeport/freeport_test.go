package freeport

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/uprev-dev/uprev/internal/testenv/filelock"
)

// childLockEnv, when set, makes the test binary a second test process that
// tries to lock the file it names.
const childLockEnv = "UPREV_FREEPORT_CHILD_LOCK"

func TestMain(m *testing.M) {
	if path := os.Getenv(childLockEnv); path != "" {
		_, ok, err := filelock.TryLock(path)
		switch {
		case err != nil:
			fmt.Print("error: ", err)
		case ok:
			fmt.Print("locked")
		default:
			fmt.Print("held")
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func port(t *testing.T, addr string) int {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("address %q is not 127.0.0.1:<port> (%v)", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The kernel gives ports of its ephemeral range to any socket of any
// process, so a port from that range can be taken between the test
// choosing it and its server binding it.
func TestPortsAreOutsideTheKernelsEphemeralRange(t *testing.T) {
	lo, hi := ephemeralRange()
	seen := map[int]bool{}
	for range 50 {
		p := port(t, Addr(t))
		if p >= lo && p <= hi {
			t.Fatalf("port %d is in the kernel's ephemeral range %d-%d", p, lo, hi)
		}
		if seen[p] {
			t.Fatalf("port %d was handed out twice", p)
		}
		seen[p] = true
	}
}

func TestAReservedPortIsFreeToListenOn(t *testing.T) {
	addr := Addr(t)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on the reserved %s: %v", addr, err)
	}
	_ = l.Close()
}

// Test packages run as processes side by side: one must never be given a
// port another holds.
func TestAnotherProcessCannotTakeAReservedPort(t *testing.T) {
	p := port(t, Addr(t))
	run := func(path string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childLockEnv+"="+path)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("second process: %v\n%s", err, out)
		}
		return string(out)
	}
	if got := run(filepath.Join(os.TempDir(), "uprev-test-ports", strconv.Itoa(p))); got != "held" {
		t.Fatalf("a second process locking reserved port %d got %q, want held", p, got)
	}
	// And the lock is what refuses it: a file nobody holds is locked.
	if got := run(filepath.Join(t.TempDir(), "unheld")); got != "locked" {
		t.Fatalf("a second process locking a file nobody holds got %q, want locked", got)
	}
}
