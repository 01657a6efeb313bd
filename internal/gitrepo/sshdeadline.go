package gitrepo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"golang.org/x/net/proxy"

	"github.com/uprev-dev/uprev/internal/outbound"
)

// go-git's SSH transport dials and shakes hands with the server before it
// looks at the operation's context, so a server that accepts the
// connection and never answers would hold it forever. SSH connections are
// therefore dialed through a dialer of this package, which go-git reaches
// through its proxy option (x/net/proxy's registered schemes): it dials
// the server (through the remote's own proxy, if any) and sets the
// operation's deadline on the connection, which ends every read and write
// of the handshake and of the operation at that time.

// sshDeadlineScheme is the proxy URL scheme of deadlineDialer; the URL's
// host is the token of an sshDial.
const sshDeadlineScheme = "uprev-ssh-deadline"

// sshDials are the SSH connections being made, by token.
var sshDials sync.Map

// sshDial is what one SSH operation's connection is dialed with.
type sshDial struct {
	deadline time.Time
	// via is the remote's own proxy, nil for none.
	via *url.URL
	// budget, when set, counts the connection's reads (limitSSHReads).
	budget *readBudget
}

func init() {
	proxy.RegisterDialerType(sshDeadlineScheme, func(u *url.URL, _ proxy.Dialer) (proxy.Dialer, error) {
		return deadlineDialer{token: u.Host}, nil
	})
}

// sshDeadlineProxy registers the dial of an SSH operation that must end by
// deadline, through the proxy opts (empty for none), and returns the proxy
// options that make go-git dial it, and a function that forgets it.
func sshDeadlineProxy(deadline time.Time, opts transport.ProxyOptions) (transport.ProxyOptions, func(), error) {
	dial := sshDial{deadline: deadline}
	if opts.URL != "" {
		via, err := opts.FullURL()
		if err != nil {
			return transport.ProxyOptions{}, nil, fmt.Errorf("parsing the proxy URL: %w", err)
		}
		dial.via = via
	}
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		return transport.ProxyOptions{}, nil, err
	}
	token := hex.EncodeToString(raw)
	sshDials.Store(token, dial)
	return transport.ProxyOptions{URL: sshDeadlineScheme + "://" + token}, func() { sshDials.Delete(token) }, nil
}

// limitSSHReads counts the reads of the SSH connection that the proxy
// options of sshDeadlineProxy dial against budget.
func limitSSHReads(opts transport.ProxyOptions, budget *readBudget) {
	token := strings.TrimPrefix(opts.URL, sshDeadlineScheme+"://")
	if v, ok := sshDials.Load(token); ok {
		dial := v.(sshDial)
		dial.budget = budget
		sshDials.Store(token, dial)
	}
}

// deadlineDialer dials the connection of the sshDial of its token.
type deadlineDialer struct {
	token string
}

// Dial dials addr with the sshDial's deadline.
func (d deadlineDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

// DialContext dials addr, through the sshDial's proxy if any, and sets the
// sshDial's deadline on the connection.
func (d deadlineDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	v, ok := sshDials.Load(d.token)
	if !ok {
		return nil, errors.New("dialing the Git server: the operation is over")
	}
	dial := v.(sshDial)
	ctx, cancel := context.WithDeadline(ctx, dial.deadline)
	defer cancel()
	checked := outbound.Installed().Dialer()
	var forward proxy.ContextDialer = checked
	if dial.via != nil {
		p, err := proxy.FromURL(dial.via, checked)
		if err != nil {
			return nil, fmt.Errorf("dialing the proxy: %w", err)
		}
		cd, ok := p.(proxy.ContextDialer)
		if !ok {
			return nil, fmt.Errorf("the proxy scheme %q cannot dial with a deadline", dial.via.Scheme)
		}
		forward = cd
	}
	conn, err := forward.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if err := conn.SetDeadline(dial.deadline); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("setting the deadline of the connection: %w", err)
	}
	if dial.budget != nil {
		conn = dial.budget.conn(conn)
	}
	return conn, nil
}
