// Package tarpit is a server that accepts TCP connections and never
// answers: no banner, no response, nothing read. It stands for the slowest
// server a tenant can point uprev at, so that tests show every outside call
// has a deadline and that one tenant's slow server holds back no one else.
package tarpit

import (
	"errors"
	"net"
	"sync"
	"testing"
)

// Tarpit is a listening tarpit. Close (run when the test ends) drops every
// connection it holds.
type Tarpit struct {
	listener net.Listener

	mu       sync.Mutex
	conns    []net.Conn
	accepted int
	closed   bool
	done     chan struct{}
}

// Start listens on a free port of 127.0.0.1 until the test ends.
func Start(t testing.TB) *Tarpit {
	t.Helper()
	tp, err := New()
	if err != nil {
		t.Fatalf("starting the tarpit: %v", err)
	}
	t.Cleanup(tp.Close)
	return tp
}

// New listens on a free port of 127.0.0.1; the caller closes it.
func New() (*Tarpit, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	tp := &Tarpit{listener: l, done: make(chan struct{})}
	go tp.serve()
	return tp, nil
}

// serve accepts connections and keeps them open, never reading or writing.
func (tp *Tarpit) serve() {
	defer close(tp.done)
	for {
		c, err := tp.listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		tp.mu.Lock()
		if tp.closed {
			_ = c.Close()
		} else {
			tp.conns = append(tp.conns, c)
			tp.accepted++
		}
		tp.mu.Unlock()
	}
}

// Addr returns the host:port the tarpit listens on.
func (tp *Tarpit) Addr() string {
	return tp.listener.Addr().String()
}

// Accepted returns how many connections the tarpit accepted.
func (tp *Tarpit) Accepted() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.accepted
}

// Close stops listening and drops every connection.
func (tp *Tarpit) Close() {
	tp.mu.Lock()
	if tp.closed {
		tp.mu.Unlock()
		return
	}
	tp.closed = true
	conns := tp.conns
	tp.conns = nil
	tp.mu.Unlock()
	_ = tp.listener.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	<-tp.done
}
