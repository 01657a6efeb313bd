package update

import (
	"crypto/sha256"
	"sync"
)

// ScanCache keeps what scanning found in file contents, by content, so
// that a run over a checkout that mostly did not change since the last
// one parses only the files that did: an automation's runs see the same
// marked files again and again, and parsing them is most of a run's CPU.
// A content is known by its SHA-256 and the default namespace it was read
// with; what was found is the same for the same bytes. It holds at most
// its bound of contents, forgetting the oldest first, and is safe for
// concurrent use by several runs. The nil *ScanCache keeps nothing.
type ScanCache struct {
	mu      sync.Mutex
	max     int
	entries map[scanKey]scanned
	// order holds the keys in the order they were added, a ring of max
	// slots whose oldest is at next once it is full.
	order []scanKey
	next  int
}

// scanKey is one content read with one default namespace.
type scanKey struct {
	sum       [sha256.Size]byte
	namespace string
}

// scanned is what scanning one content found. Its slices are shared by
// every run that reads them and never changed.
type scanned struct {
	sites []site
	errs  []lineError
}

// NewScanCache returns a cache of the scans of at most max contents.
func NewScanCache(max int) *ScanCache {
	return &ScanCache{max: max, entries: make(map[scanKey]scanned, max)}
}

// scan returns the marked scalars of src, or the errors that leave it
// untouched, as scanMarkers does, from the cache when src was seen.
func (c *ScanCache) scan(src []byte, defaultNamespace string) ([]site, []lineError) {
	if c == nil || c.max <= 0 {
		return scanMarkers(src, defaultNamespace)
	}
	key := scanKey{sum: sha256.Sum256(src), namespace: defaultNamespace}
	c.mu.Lock()
	found, ok := c.entries[key]
	c.mu.Unlock()
	if ok {
		return found.sites, found.errs
	}
	sites, errs := scanMarkers(src, defaultNamespace)
	c.add(key, scanned{sites: sites, errs: errs})
	return sites, errs
}

// add keeps s under key, forgetting the oldest content when full.
func (c *ScanCache) add(key scanKey, s scanned) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; ok {
		return
	}
	if len(c.order) < c.max {
		c.order = append(c.order, key)
	} else {
		delete(c.entries, c.order[c.next])
		c.order[c.next] = key
		c.next = (c.next + 1) % c.max
	}
	c.entries[key] = s
}
