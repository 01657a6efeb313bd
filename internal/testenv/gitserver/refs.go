package gitserver

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// AdvertiseRefs makes the repository name advertise n more references,
// refs/<prefix><i, 9 digits><suffix>, all at the tip of its branch, by
// writing them into its packed-refs as a repository holding that many
// would have them (any packed references it had are replaced): git then
// lists every one in its advertisement. A test gives a remote a million
// branches, or references with names of kilobytes, in a second.
func (s *Server) AdvertiseRefs(t testing.TB, name, branch, prefix, suffix string, n int) {
	t.Helper()
	sha := s.Git(t, name, "rev-parse", "refs/heads/"+branch)
	f, err := os.Create(filepath.Join(s.RepoDir(name), "packed-refs"))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	// Sorted, as the 9-digit numbers keep them: git reads them as they are.
	// A bufio.Writer keeps its first error for Flush, checked below.
	_, _ = fmt.Fprintln(w, "# pack-refs with: peeled fully-peeled sorted ")
	for i := range n {
		_, _ = fmt.Fprintf(w, "%s refs/%s%09d%s\n", sha, prefix, i, suffix)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
