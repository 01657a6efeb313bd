package apply

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

const (
	// maxIdleMappings bounds the REST mappings kept for API servers that
	// no Apply is using: 64 of about 0.25 MB each. A fleet of more
	// clusters rebuilds the mapping of an evicted one when it next
	// applies, with two discovery requests (aggregated discovery).
	maxIdleMappings = 64
	// mappingFreshFor is how long a REST mapping serves before it is
	// rebuilt from discovery at its next use. Within it, a kind the
	// mapping does not know (a CRD applied since) is looked up again when
	// asked for, so the age bounds only how long a kind the API server
	// stopped serving stays mapped.
	mappingFreshFor = 10 * time.Minute
	// maxRememberedTotal bounds the objects remembered by all the Appliers
	// of one Shared together (about 180 bytes each: some 45 MB), so that a
	// fleet of 1,000 targets of 250 objects each skips the dry-run of every
	// unchanged object. Past it, objects are diffed in full on their next
	// Apply rather than remembered.
	maxRememberedTotal = 250_000
)

// Shared is what the Appliers of one process share.
//
// What an Applier learns of a cluster that does not depend on who asks, the
// REST mapping that discovery gives, is kept once per API server (its URL,
// TLS server name and CA bundle), whatever the credentials of the Appliers
// that reach it: discovery is readable by every authenticated user, and a
// mapping is always loaded through the credentials of the Applier that
// needs it. A mapping in use by an Apply is kept; of those no Apply uses,
// the maxIdleMappings most recently used. It is rebuilt when older than
// mappingFreshFor, and a kind it does not know is looked up again when
// asked for (a CRD the set applied).
//
// An Applier holds its clients only while an Apply or Delete runs; in
// between it keeps its remembered versions, maxRememberedTotal objects in
// all across the Appliers of one Shared.
type Shared struct {
	clock clock.PassiveClock

	mu       sync.Mutex
	mappings map[string]*mapping

	// sessions counts the Appliers' clients held for Applies and
	// Deletes in progress.
	sessions atomic.Int64
	// remembered is the budget of remembered versions.
	remembered budget
	// appliers numbers the Appliers made, for the mappings of those that
	// do not share theirs.
	appliers atomic.Int64
}

// NewShared returns an empty Shared. clk ages its REST mappings; nil means
// the wall clock.
func NewShared(clk clock.PassiveClock) *Shared {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Shared{clock: clk, mappings: map[string]*mapping{}, remembered: budget{limit: maxRememberedTotal}}
}

// Mappings returns how many REST mappings s keeps: one per API server in
// use or recently used.
func (s *Shared) Mappings() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mappings)
}

// Sessions returns how many Appliers hold their clients, for an Apply or a
// Delete in progress: zero once every target is done.
func (s *Shared) Sessions() int {
	return int(s.sessions.Load())
}

// Remembered returns how many objects the Appliers of s remember.
func (s *Shared) Remembered() int {
	return s.remembered.inUse()
}

// acquireMapping returns the REST mapping named key (mappingKey), counted
// as in use until releaseMapping.
func (s *Shared) acquireMapping(key string) *mapping {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.mappings[key]
	if !ok {
		m = &mapping{key: key, clock: s.clock}
		s.mappings[key] = m
	}
	m.users++
	return m
}

// releaseMapping counts one user less of m and drops, past
// maxIdleMappings, the least recently used mappings no Apply uses.
func (s *Shared) releaseMapping(m *mapping) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m.users--
	m.lastUsed = s.clock.Now()
	for {
		var idle int
		var oldest *mapping
		for _, c := range s.mappings {
			if c.users > 0 {
				continue
			}
			idle++
			if oldest == nil || c.lastUsed.Before(oldest.lastUsed) {
				oldest = c
			}
		}
		if idle <= maxIdleMappings {
			return
		}
		delete(s.mappings, oldest.key)
	}
}

// mappingKey identifies the API server cfg reaches: its URL, the TLS
// server name and the CA bundle it is verified with. Credentials are not
// part of it: discovery does not depend on who asks. A config that does
// not verify the server (insecure-skip-tls-verify) cannot tell which
// server answered, so its key is of its Applier alone (unshared). An
// Applier computes it once: its config does not change, and impersonation
// does not change the server.
func mappingKey(cfg *rest.Config, unshared string) (string, error) {
	tls := cfg.TLSClientConfig
	if tls.Insecure {
		return "unverified\x00" + unshared, nil
	}
	ca := tls.CAData
	if tls.CAFile != "" && len(ca) == 0 {
		// Read once per Applier, for the key; client-go reads it itself.
		var err error
		if ca, err = os.ReadFile(tls.CAFile); err != nil {
			return "", fmt.Errorf("reading CA file: %w", err)
		}
	}
	sum := sha256.Sum256(ca)
	return cfg.Host + "\x00" + tls.ServerName + "\x00" + hex.EncodeToString(sum[:]), nil
}

// budget counts remembered objects against a limit.
type budget struct {
	mu          sync.Mutex
	used, limit int
}

// resize changes a holder's share from held to up to want objects and
// returns the share granted: want, or what is left under the limit.
func (b *budget) resize(held, want int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	granted := min(want, b.limit-(b.used-held))
	granted = max(granted, 0)
	b.used += granted - held
	return granted
}

// inUse returns how many objects are held.
func (b *budget) inUse() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
