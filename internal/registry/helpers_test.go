package registry

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
)

// fakeClock records the waits asked of it and returns at once, moving its
// time forward by each wait.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return ctx.Err()
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
