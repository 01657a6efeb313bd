package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Store keeps the tags of many repositories in the directory Dir, one file
// per key, each replaced atomically and read on demand; see the package
// documentation for why. A Store holds no state besides Dir: a new Store on
// the same directory reads what an earlier one wrote. Concurrent calls are
// safe: within a process, the calls that change a key's file (SetTags,
// SeeDigest) read, change and write it one at a time, whichever Store value
// they are made on; two processes must not share a Dir.
//
// With each tag, the Store keeps when a scan first saw it (SeenTags): a
// tag that an earlier SetTags of the same key stored keeps its time, a new
// one gets the clock's now. It also keeps the digest the tag last pointed
// at, when one was looked up (SeeDigest): a tag found at another digest
// than the one recorded moved, and is seen anew, its time the clock's now.
// A move is found only by a look-up; scans list tag names.
type Store struct {
	// Dir is the directory of the files; it is created when first written.
	Dir string
	// Clock tells when tags are first seen; the wall clock when nil.
	Clock clock.PassiveClock
}

// SeenTag is a stored tag and when a scan first saw it.
type SeenTag struct {
	// Name is the tag.
	Name string
	// FirstSeen is when SetTags first stored the tag under its key, or
	// when SeeDigest found it moved, to the second.
	FirstSeen time.Time
	// Digest is the digest SeeDigest last recorded for the tag; empty when
	// none was.
	Digest string
}

// SetTags replaces the tags stored under key, e.g. "namespace/name" of an
// ImageRepository, keeping the first-seen time and digest of the tags
// stored before. The same tags in the same order leave the file as it is.
func (s Store) SetTags(key string, tags []string) error {
	for _, tag := range tags {
		if tag == "" || strings.ContainsAny(tag, "\n\r\t") || tag[0] == '#' {
			return fmt.Errorf("storing tags of %s: invalid tag %q", key, tag)
		}
	}
	unlock := s.lock(key)
	defer unlock()
	// What cannot be read (nothing stored, a file cut short) is seen now.
	var known []SeenTag
	body, written, err := s.read(key, true)
	if err == nil {
		if sameNames(body, tags) {
			// A scan that found what the last one stored writes nothing,
			// and reads the stored times of none of them.
			return nil
		}
		if known, err = parseSeen(key, body, written); err != nil {
			known = nil
		}
	}
	stored := make(map[string]SeenTag, len(known))
	for _, t := range known {
		stored[t.Name] = t
	}
	now := s.now()
	seen := make([]SeenTag, 0, len(tags))
	for _, tag := range tags {
		t, ok := stored[tag]
		if !ok {
			t = SeenTag{Name: tag, FirstSeen: now}
		}
		seen = append(seen, t)
	}
	return s.write(key, seen)
}

// SeeDigest records that tag, stored under key, points at digest, and
// returns the tag as stored now. When another digest was recorded for it
// before, the tag moved and is seen anew: its FirstSeen becomes the
// clock's now. The first digest recorded for a tag keeps its time. A tag
// not stored under key is an error wrapping fs.ErrNotExist (a scan
// dropped it meanwhile).
func (s Store) SeeDigest(key, tag, digest string) (SeenTag, error) {
	if digest == "" || strings.ContainsAny(digest, " \n\r\t") {
		return SeenTag{}, fmt.Errorf("recording the digest of %s in %s: invalid digest %q", tag, key, digest)
	}
	unlock := s.lock(key)
	defer unlock()
	tags, err := s.SeenTags(key)
	if err != nil {
		return SeenTag{}, fmt.Errorf("recording the digest of %s: %w", tag, err)
	}
	i := slices.IndexFunc(tags, func(t SeenTag) bool { return t.Name == tag })
	if i < 0 {
		return SeenTag{}, fmt.Errorf("recording the digest of %s: the tag is no longer stored under %s: %w", tag, key, fs.ErrNotExist)
	}
	t := &tags[i]
	if t.Digest == digest {
		return *t, nil
	}
	if t.Digest != "" {
		t.FirstSeen = s.now()
	}
	t.Digest = digest
	if err := s.write(key, tags); err != nil {
		return SeenTag{}, err
	}
	return *t, nil
}

// write replaces the file of key with tags, atomically.
func (s Store) write(key string, tags []SeenTag) error {
	var buf bytes.Buffer
	for _, t := range tags {
		buf.Grow(len(t.Name) + len(t.Digest) + 14)
		buf.WriteString(t.Name)
		buf.WriteByte('\t')
		buf.Write(strconv.AppendInt(buf.AvailableBuffer(), t.FirstSeen.Unix(), 10))
		if t.Digest != "" {
			buf.WriteByte('\t')
			buf.WriteString(t.Digest)
		}
		buf.WriteByte('\n')
	}
	fmt.Fprintf(&buf, "%s%d\n", trailerPrefix, len(tags))
	tmp, err := os.CreateTemp(s.Dir, ".tags-*")
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(s.Dir, 0o700); err == nil {
			tmp, err = os.CreateTemp(s.Dir, ".tags-*")
		}
	}
	if err != nil {
		return fmt.Errorf("storing tags of %s: %w", key, err)
	}
	_, err = tmp.Write(buf.Bytes())
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.path(key))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("storing tags of %s: %w", key, err)
	}
	return nil
}

// fileLocks serialize the read-change-write of a key's file within the
// process, across Store values: a file's path picks one of them.
var fileLocks [64]sync.Mutex

// fileLockSeed hashes paths to fileLocks.
var fileLockSeed = maphash.MakeSeed()

// lock locks the file of key until the returned function is called.
func (s Store) lock(key string) (unlock func()) {
	mu := &fileLocks[maphash.String(fileLockSeed, s.path(key))%uint64(len(fileLocks))]
	mu.Lock()
	return mu.Unlock
}

// Tags returns the tags stored under key. When nothing is, or what is
// stored is incomplete, the error wraps fs.ErrNotExist: either way the
// repository needs a scan.
func (s Store) Tags(key string) ([]string, error) {
	body, _, err := s.read(key, false)
	if err != nil {
		return nil, err
	}
	tags := make([]string, 0, strings.Count(body, "\n"))
	for line := range strings.Lines(body) {
		tag, _, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		tags = append(tags, tag)
	}
	return tags, nil
}

// SeenTags returns the tags stored under key with the time a scan first
// saw each and the digest last recorded for it, in the order they were
// stored; errors are those of Tags. A tag stored by a version of uprev
// that kept no times counts as first seen when its file was last written,
// the latest time it may have appeared; one stored by a version that kept
// no digests has none recorded.
func (s Store) SeenTags(key string) ([]SeenTag, error) {
	body, written, err := s.read(key, true)
	if err != nil {
		return nil, err
	}
	return parseSeen(key, body, written)
}

// sameNames tells whether the lines of body name tags, in their order,
// each with a time that parseSeen reads, allocating nothing.
func sameNames(body string, tags []string) bool {
	i := 0
	for line := range strings.Lines(body) {
		name, rest, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		if i == len(tags) || tags[i] != name {
			return false
		}
		if ok {
			seen, _, _ := strings.Cut(rest, "\t")
			if _, err := strconv.ParseInt(seen, 10, 64); err != nil {
				return false
			}
		}
		i++
	}
	return i == len(tags)
}

// parseSeen reads the lines of the tags stored under key, written when
// the file was, as SeenTags returns them.
func parseSeen(key, body string, written time.Time) ([]SeenTag, error) {
	tags := make([]SeenTag, 0, strings.Count(body, "\n"))
	for line := range strings.Lines(body) {
		tag, rest, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		seen, digest, _ := strings.Cut(rest, "\t")
		t := SeenTag{Name: tag, FirstSeen: written, Digest: digest}
		if ok {
			unix, err := strconv.ParseInt(seen, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("reading tags of %s: first-seen time of %q: %w", key, tag, err)
			}
			t.FirstSeen = time.Unix(unix, 0)
		}
		tags = append(tags, t)
	}
	return tags, nil
}

// read returns the lines of the tags stored under key, without the
// trailer, and, when modTime is set, when the file was last written.
func (s Store) read(key string, modTime bool) (body string, written time.Time, err error) {
	f, err := os.Open(s.path(key))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("reading tags of %s: %w", key, err)
	}
	defer func() { _ = f.Close() }() // read only
	info, err := f.Stat()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("reading tags of %s: %w", key, err)
	}
	if modTime {
		written = info.ModTime().Truncate(time.Second)
	}
	// Read into a string of the file's size: one copy of the content,
	// not the doublings of io.ReadAll and a conversion after.
	var data strings.Builder
	data.Grow(int(info.Size()))
	if _, err := io.Copy(&data, f); err != nil {
		return "", time.Time{}, fmt.Errorf("reading tags of %s: %w", key, err)
	}
	content, ok := strings.CutSuffix(data.String(), "\n")
	lastLine := strings.LastIndexByte(content, '\n') + 1
	body, trailer := content[:lastLine], content[lastLine:]
	if !ok || trailer != trailerPrefix+strconv.Itoa(strings.Count(body, "\n")) {
		return "", time.Time{}, fmt.Errorf("reading tags of %s: the file is incomplete, as after a crash during a write: %w", key, fs.ErrNotExist)
	}
	return body, written, nil
}

// now returns the clock's time.
func (s Store) now() time.Time {
	if s.Clock == nil {
		return clock.RealClock{}.Now()
	}
	return s.Clock.Now()
}

// Delete removes the tags stored under key; deleting a missing key is not
// an error.
func (s Store) Delete(key string) error {
	if err := os.Remove(s.path(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("deleting tags of %s: %w", key, err)
	}
	return nil
}

// trailerPrefix starts the last line of a tags file, which holds the number
// of tags. Files are renamed into place but not synced (the tags are a cache
// that a scan rebuilds, and syncing a thousand files costs seconds), so
// after a power loss a file may be cut short; the count tells.
const trailerPrefix = "#count "

// path returns the file of key: its SHA-256 in hex, so that any key is a
// safe, fixed-length file name.
func (s Store) path(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(s.Dir, hex.EncodeToString(sum[:])+".tags")
}
