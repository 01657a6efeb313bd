package outbound

import (
	"net/http"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// installed is the Denylist of the process; see Install.
var installed struct {
	sync.RWMutex
	list Denylist
}

// Install makes d the Denylist of the whole process: of go-git's HTTP(S)
// protocols, of the SSH dialer of internal/gitrepo (Installed), and of
// net/http's DefaultTransport, which libraries that take no client of ours
// clone for their calls (Flux's GitHub App token exchange, among them).
// The manager calls it once, at start, before any call goes out; an empty
// d denies nothing.
//
// It is process-wide because those libraries choose their connections from
// process-wide state: go-git from a table of protocols
// (client.InstallProtocol), Flux's githubapp from a clone of
// http.DefaultTransport, and neither offers a client per call.
func Install(d Denylist) {
	installed.Lock()
	installed.list = d
	installed.Unlock()
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t.DialContext = d.Dialer().DialContext
	}
	if len(d) == 0 {
		client.InstallProtocol("http", githttp.DefaultClient)
		client.InstallProtocol("https", githttp.DefaultClient)
		return
	}
	// go-git clones this transport for remotes with their own CA or proxy,
	// and the clone keeps the dialer.
	checked := githttp.NewClient(&http.Client{Transport: d.Transport()})
	client.InstallProtocol("http", checked)
	client.InstallProtocol("https", checked)
}

// Installed returns the Denylist that Install set, for the dialers made
// per operation (Git over SSH, Git tag listing).
func Installed() Denylist {
	installed.RLock()
	defer installed.RUnlock()
	return installed.list
}
