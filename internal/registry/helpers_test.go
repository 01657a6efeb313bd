package registry

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
)

// fakeClock records the waits asked of it and ends each at once, moving
// its time forward by the wait.
type fakeClock struct {
	*clocktesting.FakeClock
	mu     sync.Mutex
	sleeps []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{FakeClock: clocktesting.NewFakeClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))}
}

// NewTimer records d and returns a timer that has fired, the clock moved
// past it.
func (c *fakeClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	timer := c.FakeClock.NewTimer(d)
	c.Step(d)
	return timer
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// semverTags returns n distinct tags 1.<i/100>.<i%100>.
func semverTags(n int) []string {
	tags := make([]string, n)
	for i := range tags {
		tags[i] = fmt.Sprintf("1.%d.%d", i/100, i%100)
	}
	return tags
}

// newClient returns a Client of a new Scanner with opts for access, failing
// the test on error.
func newClient(t testing.TB, opts ScannerOptions, access Access) *Client {
	t.Helper()
	c, err := NewScanner(opts).Client(t.Context(), access)
	if err != nil {
		t.Fatalf("making a registry client: %v", err)
	}
	return c
}

// dockerConfig returns the data of a dockerconfigjson Secret holding
// username and password for the registry r.
func dockerConfig(r *testregistry.Registry, username, password string) map[string][]byte {
	return map[string][]byte{
		".dockerconfigjson": fmt.Appendf(nil, `{"auths":{%q:{"username":%q,"password":%q}}}`, r.Host(), username, password),
	}
}
