package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Store keeps the tags of many repositories in the directory Dir, one file
// per key, each replaced atomically and read on demand; see the package
// documentation for why. A Store holds no state besides Dir: a new Store on
// the same directory reads what an earlier one wrote. Concurrent calls are
// safe; for one key, the last SetTags wins.
type Store struct {
	// Dir is the directory of the files; it is created when first written.
	Dir string
}

// SetTags replaces the tags stored under key, e.g. "namespace/name" of an
// ImageRepository.
func (s Store) SetTags(key string, tags []string) error {
	var buf bytes.Buffer
	for _, tag := range tags {
		if tag == "" || strings.ContainsAny(tag, "\n\r") || tag[0] == '#' {
			return fmt.Errorf("storing tags of %s: invalid tag %q", key, tag)
		}
		buf.Grow(len(tag) + 1)
		buf.WriteString(tag)
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
	data, err := os.ReadFile(s.path(key))
	if err != nil {
		return nil, fmt.Errorf("reading tags of %s: %w", key, err)
	}
	content, ok := strings.CutSuffix(string(data), "\n")
	lastLine := strings.LastIndexByte(content, '\n') + 1
	body, trailer := content[:lastLine], content[lastLine:]
	if !ok || trailer != trailerPrefix+strconv.Itoa(strings.Count(body, "\n")) {
		return nil, fmt.Errorf("reading tags of %s: the file is incomplete, as after a crash during a write: %w", key, fs.ErrNotExist)
	}
	tags := make([]string, 0, strings.Count(body, "\n"))
	for line := range strings.Lines(body) {
		tags = append(tags, strings.TrimSuffix(line, "\n"))
	}
	return tags, nil
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
