package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// Store keeps the tags of many repositories in the directory Dir, one file
// per key, each replaced atomically and read on demand; see the package
// documentation for why. A Store holds no state besides Dir: a new Store on
// the same directory reads what an earlier one wrote. Concurrent calls are
// safe; for one key, the last SetTags wins.
//
// With each tag, the Store keeps when a scan first saw it (SeenTags): a
// tag that an earlier SetTags of the same key stored keeps its time, a new
// one gets the clock's now. It keeps tag names only, no digests, so a tag
// moved to another digest keeps the time its name was first seen.
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
	// FirstSeen is when SetTags first stored the tag under its key, to
	// the second.
	FirstSeen time.Time
}

// SetTags replaces the tags stored under key, e.g. "namespace/name" of an
// ImageRepository, keeping the first-seen time of the tags stored before.
func (s Store) SetTags(key string, tags []string) error {
	for _, tag := range tags {
		if tag == "" || strings.ContainsAny(tag, "\n\r\t") || tag[0] == '#' {
			return fmt.Errorf("storing tags of %s: invalid tag %q", key, tag)
		}
	}
	// What cannot be read (nothing stored, a file cut short) is seen now.
	known, _ := s.SeenTags(key)
	firstSeen := make(map[string]int64, len(known))
	for _, t := range known {
		firstSeen[t.Name] = t.FirstSeen.Unix()
	}
	now := s.now().Unix()
	var buf bytes.Buffer
	for _, tag := range tags {
		seen, ok := firstSeen[tag]
		if !ok {
			seen = now
		}
		buf.Grow(len(tag) + 12)
		buf.WriteString(tag)
		buf.WriteByte('\t')
		buf.Write(strconv.AppendInt(buf.AvailableBuffer(), seen, 10))
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
// saw each, in the order they were stored; errors are those of Tags. A tag
// stored by a version of uprev that kept no times counts as first seen
// when its file was last written, the latest time it may have appeared.
func (s Store) SeenTags(key string) ([]SeenTag, error) {
	body, written, err := s.read(key, true)
	if err != nil {
		return nil, err
	}
	tags := make([]SeenTag, 0, strings.Count(body, "\n"))
	for line := range strings.Lines(body) {
		tag, seen, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		t := SeenTag{Name: tag, FirstSeen: written}
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
	defer f.Close()
	if modTime {
		info, err := f.Stat()
		if err != nil {
			return "", time.Time{}, fmt.Errorf("reading tags of %s: %w", key, err)
		}
		written = info.ModTime().Truncate(time.Second)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("reading tags of %s: %w", key, err)
	}
	content, ok := strings.CutSuffix(string(data), "\n")
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
		return time.Now()
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
