package gitrepo

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// The clone cache on disk, under its root:
//
//	<repository>/               one per repository URL: a hash of the URL
//	<repository>/store-<n>/     the object store: objects and fetched refs, a
//	                            bare repository; n grows with each replacement
//	<repository>/<checkout>/    a working tree, one per branch read (branch-<hash>)
//	                            and one each for tags, commits and commits of a
//	                            branch (tag, commit, branch-commit); its .git holds
//	                            HEAD, the index and a commondir naming its store
//	.trash/                     what is being removed
//
// A checkout is a linked work tree of its store, as `git worktree` makes
// them: go-git reads its HEAD and index from its .git and everything else
// from the store, and the git CLI works in it too. Each checkout fetches
// into refs/remotes/<checkout>/ of the store, so the checkouts of a
// repository never move each other's refs, and a fetch sends what any of
// them has as haves: a repository's objects are fetched and stored once.
const (
	trashDir        = ".trash"
	storePrefix     = "store-"
	tempSuffix      = ".new-"
	commonDirFile   = "commondir"
	tagCheckout     = "tag"
	commitCheckout  = "commit"
	branchCommit    = "branch-commit"
	branchPrefix    = "branch-"
	repositoryChars = 24
)

// repository is what the cache keeps of one repository URL: its object
// stores and its checkouts. The Cache's mutex guards its maps.
type repository struct {
	dir string
	// clones are the checkouts, by name.
	clones map[string]*keptClone
	// stores are the object stores on disk, by generation; the newest is
	// the one new checkouts use.
	stores map[int]*objectStore
	// lastStore is the highest generation made.
	lastStore int
	// storeMu serializes making stores, so that users that find none at
	// once make one, not one each.
	storeMu sync.Mutex
}

// objectStore is one object store of a repository.
type objectStore struct {
	dir string
	gen int
	// pins counts the sessions reading the store; the Cache's mutex
	// guards it.
	pins int
}

// repositoryKey returns the directory name of the repository at url: one
// for every spelling of it (RepoKey).
func repositoryKey(url string) string {
	sum := sha256.Sum256([]byte(RepoKey(url)))
	return hex.EncodeToString(sum[:repositoryChars/2])
}

// branchCheckoutName returns the name of the checkout of branch.
func branchCheckoutName(branch string) string {
	sum := sha256.Sum256([]byte(branch))
	return branchPrefix + hex.EncodeToString(sum[:8])
}

// isCheckoutName reports whether name is one that branchCheckoutName or
// the revision targets give.
func isCheckoutName(name string) bool {
	switch name {
	case tagCheckout, commitCheckout, branchCommit:
		return true
	}
	sum, ok := strings.CutPrefix(name, branchPrefix)
	_, err := hex.DecodeString(sum)
	return ok && len(sum) == 16 && err == nil
}

// storeGeneration returns the generation of a store directory name.
func storeGeneration(name string) (int, bool) {
	n, ok := strings.CutPrefix(name, storePrefix)
	if !ok {
		return 0, false
	}
	gen, err := strconv.Atoi(n)
	return gen, err == nil && gen > 0 && strconv.Itoa(gen) == n
}

// current returns the newest store, nil when there is none.
func (r *repository) current() *objectStore {
	var newest *objectStore
	for _, st := range r.stores {
		if newest == nil || st.gen > newest.gen {
			newest = st
		}
	}
	return newest
}

// repository returns the entry of the repository key, making it. The
// caller holds c.mu.
func (c *Cache) repository(key string) *repository {
	r, ok := c.repositories[key]
	if !ok {
		r = &repository{dir: filepath.Join(c.root, key), clones: map[string]*keptClone{}, stores: map[int]*objectStore{}}
		c.repositories[key] = r
	}
	return r
}

// clone returns the entry of the checkout name of r, making it. The caller
// holds c.mu.
func (c *Cache) clone(r *repository, name string) *keptClone {
	kc, ok := r.clones[name]
	if !ok {
		kc = &keptClone{name: name, repository: r, dir: filepath.Join(r.dir, name), lock: make(chan struct{}, 1), lastUsed: c.clock.Now()}
		r.clones[name] = kc
	}
	return kc
}

// pinStore returns a store of r for a session to read, pinned until the
// session closes, and whether it made it: the newest one, or a new one when
// fresh or when there is none. A new store is written under a temporary
// name and renamed, so that a crash never leaves one half made.
func (c *Cache) pinStore(r *repository, fresh bool) (st *objectStore, made bool, err error) {
	r.storeMu.Lock()
	defer r.storeMu.Unlock()
	c.mu.Lock()
	if st := r.current(); st != nil && !fresh {
		st.pins++
		c.mu.Unlock()
		return st, false, nil
	}
	r.lastStore++
	gen := r.lastStore
	c.mu.Unlock()

	name := storePrefix + strconv.Itoa(gen)
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("creating the repository directory: %w", err)
	}
	tmp, err := os.MkdirTemp(r.dir, name+tempSuffix)
	if err != nil {
		return nil, false, fmt.Errorf("creating the object store: %w", err)
	}
	if _, err := git.PlainInit(tmp, true); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, false, fmt.Errorf("creating the object store: %w", err)
	}
	st = &objectStore{dir: filepath.Join(r.dir, name), gen: gen, pins: 1}
	if err := os.Rename(tmp, st.dir); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, false, fmt.Errorf("moving the object store in place: %w", err)
	}
	c.mu.Lock()
	r.stores[gen] = st
	c.mu.Unlock()
	return st, true, nil
}

// discardStore removes the store st of r that a clone which failed made,
// unless another session reads it by now, so that a failing clone does not
// leave an empty store newer than the one the other clones use.
func (c *Cache) discardStore(r *repository, st *objectStore) {
	c.mu.Lock()
	if st.pins > 1 {
		c.mu.Unlock()
		return
	}
	delete(r.stores, st.gen)
	trashed, err := c.trash(st.dir)
	c.mu.Unlock()
	if err == nil {
		_ = os.RemoveAll(trashed) // what is left, the next sweep removes
	}
}

// initCheckout makes dir an empty checkout of the store st: a .git
// directory whose commondir names the store, relative to it so that the
// checkout may be renamed within its repository, and whose HEAD, like that
// of `git init`, names a branch yet to be born.
func initCheckout(dir string, st *objectStore) error {
	dot := filepath.Join(dir, git.GitDirName)
	if err := os.Mkdir(dot, 0o700); err != nil {
		return fmt.Errorf("creating the checkout: %w", err)
	}
	files := map[string]string{
		commonDirFile: filepath.Join("..", "..", filepath.Base(st.dir)) + "\n",
		"HEAD":        "ref: " + plumbing.Master.String() + "\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dot, name), []byte(content), 0o600); err != nil {
			return fmt.Errorf("creating the checkout: %w", err)
		}
	}
	return nil
}

// load registers what the previous process left under the root: object
// stores and checkouts, unclaimed and last used now, so that the sweep
// removes them unless a user comes back for them. Temporary directories of
// clones and stores that were being made, what was being removed, and
// anything else are removed at once.
func (c *Cache) load() error {
	if err := os.RemoveAll(filepath.Join(c.root, trashDir)); err != nil {
		return fmt.Errorf("emptying the trash: %w", err)
	}
	if err := os.Mkdir(filepath.Join(c.root, trashDir), 0o700); err != nil {
		return fmt.Errorf("creating the trash: %w", err)
	}
	entries, err := os.ReadDir(c.root)
	if err != nil {
		return fmt.Errorf("reading the clone cache: %w", err)
	}
	var errs []error
	for _, e := range entries {
		path := filepath.Join(c.root, e.Name())
		switch {
		case e.Name() == trashDir:
		case e.IsDir() && isRepositoryKey(e.Name()):
			errs = append(errs, c.loadRepository(e.Name()))
		default:
			errs = append(errs, c.remove(path))
		}
	}
	return errors.Join(errs...)
}

// loadRepository registers the stores and checkouts of the repository
// directory key.
func (c *Cache) loadRepository(key string) error {
	r := c.repository(key)
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return fmt.Errorf("reading %s: %w", r.dir, err)
	}
	var errs []error
	for _, e := range entries {
		gen, isStore := storeGeneration(e.Name())
		switch {
		case e.IsDir() && isStore:
			r.stores[gen] = &objectStore{dir: filepath.Join(r.dir, e.Name()), gen: gen}
			r.lastStore = max(r.lastStore, gen)
		case e.IsDir() && isCheckoutName(e.Name()):
			c.clone(r, e.Name())
		default:
			errs = append(errs, c.remove(filepath.Join(r.dir, e.Name())))
		}
	}
	for _, kc := range r.clones {
		common, err := os.ReadFile(filepath.Join(kc.dir, git.GitDirName, commonDirFile))
		if err != nil {
			continue // a damaged checkout, for its next user to replace
		}
		if gen, ok := storeGeneration(filepath.Base(strings.TrimSpace(string(common)))); ok {
			kc.store = r.stores[gen]
		}
	}
	if len(r.clones) == 0 && len(r.stores) == 0 {
		delete(c.repositories, key)
		errs = append(errs, c.remove(r.dir))
	}
	return errors.Join(errs...)
}

// isRepositoryKey reports whether name is one that repositoryKey gives.
func isRepositoryKey(name string) bool {
	_, err := hex.DecodeString(name)
	return len(name) == repositoryChars && err == nil
}

// remove moves path to the trash, so that nothing half removed is ever
// found where a clone or store was, and then removes it.
func (c *Cache) remove(path string) error {
	trashed, err := c.trash(path)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(trashed); err != nil {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	return nil
}

// trash moves path to the trash and returns where it is now, for
// os.RemoveAll; a path already gone is not an error.
func (c *Cache) trash(path string) (string, error) {
	dir, err := os.MkdirTemp(filepath.Join(c.root, trashDir), "")
	if err != nil {
		return "", fmt.Errorf("removing %s: %w", path, err)
	}
	trashed := filepath.Join(dir, filepath.Base(path))
	if err := os.Rename(path, trashed); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("removing %s: %w", path, err)
	}
	return dir, nil
}
