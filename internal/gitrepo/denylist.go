package gitrepo

import (
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/uprev-dev/uprev/internal/netguard"
)

// denied is the Denylist every Git connection is checked against; see
// DenyAddresses.
var denied struct {
	sync.RWMutex
	list netguard.Denylist
}

// DenyAddresses makes every Git connection of the process, HTTP(S) and
// SSH, refuse the addresses in d (--registry-deny-cidrs), checked on the
// address each connection is dialled to, after DNS, as the registry client
// does. A remote reached through its own proxy is resolved by the proxy:
// the check then applies to the proxy's address. An empty d denies
// nothing.
//
// It is process-wide because go-git chooses its HTTP client from a
// process-wide table of protocols (client.InstallProtocol) and offers no
// client per operation; the manager calls it once, at start.
func DenyAddresses(d netguard.Denylist) {
	denied.Lock()
	denied.list = d
	denied.Unlock()
	if len(d) == 0 {
		client.InstallProtocol("http", githttp.DefaultClient)
		client.InstallProtocol("https", githttp.DefaultClient)
		return
	}
	// http.DefaultTransport's settings, with the checked dialer; go-git
	// clones this transport for remotes with their own CA or proxy, and
	// the clone keeps the dialer.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = d.DialContext(net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second})
	checked := githttp.NewClient(&http.Client{Transport: transport})
	client.InstallProtocol("http", checked)
	client.InstallProtocol("https", checked)
}

// deniedAddresses returns the Denylist set by DenyAddresses.
func deniedAddresses() netguard.Denylist {
	denied.RLock()
	defer denied.RUnlock()
	return denied.list
}
