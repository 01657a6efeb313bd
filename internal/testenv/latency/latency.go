// Package latency puts a test server behind a TCP proxy that delays every
// byte by a fixed time in each direction, as a remote cluster's network
// does: a test apiserver on the same machine answers in microseconds, a
// real one across a region in tens of milliseconds.
//
// The proxy passes TLS through untouched; it listens on 127.0.0.1, so a
// certificate for that address stays valid.
package latency

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards connections to a target address, each way delayed.
type Proxy struct {
	listener net.Listener
	target   string
	delay    time.Duration
	wg       sync.WaitGroup
}

// Start proxies target (host:port) on a new port of 127.0.0.1, adding delay
// to each direction. It is stopped when the test ends.
func Start(tb testing.TB, target string, delay time.Duration) *Proxy {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("starting the latency proxy: %v", err)
	}
	p := &Proxy{listener: l, target: target, delay: delay}
	p.wg.Add(1)
	go p.serve()
	tb.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string {
	return p.listener.Addr().String()
}

// Close stops accepting connections and waits for the open ones to end.
func (p *Proxy) Close() {
	_ = p.listener.Close()
	p.wg.Wait()
}

// serve accepts connections until the listener closes.
func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.wg.Add(2)
		go p.pipe(server, client)
		go p.pipe(client, server)
	}
}

// chunk is bytes read at a time, to be written delay later.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies src to dst, each chunk delay after it was read, keeping the
// order and the throughput: reading goes on while earlier chunks wait.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	queue := make(chan chunk, 1024)
	go func() {
		defer close(queue)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				queue <- chunk{data: buf[:n], due: time.Now().Add(p.delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	timer := time.NewTimer(0)
	<-timer.C
	for c := range queue {
		if wait := time.Until(c.due); wait > 0 {
			timer.Reset(wait)
			<-timer.C
		}
		if _, err := dst.Write(c.data); err != nil {
			break
		}
	}
	// One side is done: end the connection both ways, and let the reader
	// stop.
	_ = dst.Close()
	_ = src.Close()
	for range queue {
	}
}
