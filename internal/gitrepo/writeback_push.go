package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
)

// pushed moves the tracking ref of the push branch to the pushed commit, as
// git does, so Revision and PushRevision tell what the remote now holds.
func (s *Session) pushed(commit plumbing.Hash) error {
	if err := s.repo.Storer.SetReference(plumbing.NewHashReference(s.trackingRef(s.pushBranch), commit)); err != nil {
		return fmt.Errorf("recording the pushed commit: %w", err)
	}
	if s.pushBranch != s.branch {
		s.pushTip = commit
	}
	return nil
}

// push pushes commit to ref, without force, within the remote's timeout.
// It sends a pack of the objects the remote lacks as newObjects finds them
// from the commit's parents, which the remote holds, where go-git's push
// walks the history and trees of every ref the remote has to find them:
// a push costs what the commit changed. A ref that the remote holds at a
// commit that is not an ancestor of commit is not pushed (a non-fast-
// forward update); the remote refuses the update as well if the ref moves
// in between, since the update names the commit it replaces.
func (s *Session) push(ctx context.Context, commit plumbing.Hash, ref plumbing.ReferenceName, options map[string]string) error {
	objects, err := s.newObjects(commit)
	if err != nil {
		return fmt.Errorf("finding the objects to push: %w", err)
	}
	cfg, err := s.repo.Storer.Config()
	if err != nil {
		return fmt.Errorf("reading the clone's configuration: %w", err)
	}
	err = s.receivePack(ctx, "pushing to", func(ctx context.Context, session transport.ReceivePackSession, adv *packp.AdvRefs) error {
		old, err := advertised(adv, ref)
		if err != nil {
			return err
		}
		if old == commit {
			return git.NoErrAlreadyUpToDate
		}
		if ff, err := s.isAncestor(old, commit); err != nil || !ff {
			return errors.Join(err, fmt.Errorf("non-fast-forward update: %s", ref))
		}
		req := packp.NewReferenceUpdateRequestFromCapabilities(adv.Capabilities)
		if adv.Capabilities.Supports(capability.PushOptions) {
			_ = req.Capabilities.Set(capability.PushOptions) // a known capability without arguments
			for k, v := range options {
				req.Options = append(req.Options, &packp.Option{Key: k, Value: v})
			}
		}
		req.Commands = []*packp.Command{{Name: ref, Old: old, New: commit}}
		pack, w := io.Pipe()
		req.Packfile = pack
		encoded := make(chan error, 1)
		go func() {
			_, err := packfile.NewEncoder(w, s.repo.Storer, !adv.Capabilities.Supports(capability.OFSDelta)).Encode(objects, cfg.Pack.Window)
			encoded <- w.CloseWithError(err)
		}()
		status, err := session.ReceivePack(ctx, req)
		if err != nil {
			_ = pack.Close() // ends the encoder's writes; the push failed already
			return errors.Join(err, <-encoded)
		}
		if err := <-encoded; err != nil {
			return fmt.Errorf("encoding the pack: %w", err)
		}
		if status != nil {
			return status.Error()
		}
		return nil
	})
	return classify(err)
}

// receivePack opens a receive-pack session with the remote, within its
// timeout, and calls fn with it and the references it advertised.
func (s *Session) receivePack(ctx context.Context, what string, fn func(context.Context, transport.ReceivePackSession, *packp.AdvRefs) error) error {
	return s.remote.withDeadline(ctx, what, func(ctx context.Context, proxy transport.ProxyOptions) (err error) {
		ep, err := transport.NewEndpoint(s.remote.URL)
		if err != nil {
			return err
		}
		ep.CaBundle, ep.Proxy = s.remote.caBundle, proxy
		c, err := client.NewClient(ep)
		if err != nil {
			return err
		}
		session, err := c.NewReceivePackSession(ep, s.remote.auth)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, session.Close()) }()
		adv, err := session.AdvertisedReferencesContext(ctx)
		if err != nil {
			return err
		}
		return fn(ctx, session, adv)
	})
}

// advertised returns the commit the remote advertised ref at, zero when
// it has no such ref.
func advertised(adv *packp.AdvRefs, ref plumbing.ReferenceName) (plumbing.Hash, error) {
	refs, err := adv.AllReferences()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	r, err := refs.Reference(ref)
	switch {
	case errors.Is(err, plumbing.ErrReferenceNotFound):
		return plumbing.ZeroHash, nil
	case err != nil:
		return plumbing.ZeroHash, err
	}
	return r.Hash(), nil
}

// isAncestor reports whether old is zero (a new ref) or commit or one of
// its ancestors. A parent of commit, the usual case, is found without
// walking the history.
func (s *Session) isAncestor(old, commit plumbing.Hash) (bool, error) {
	if old.IsZero() || old == commit {
		return true, nil
	}
	c, err := s.repo.CommitObject(commit)
	if err != nil {
		return false, fmt.Errorf("reading commit %s: %w", commit, err)
	}
	if slices.Contains(c.ParentHashes, old) {
		return true, nil
	}
	o, err := s.repo.CommitObject(old)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading commit %s: %w", old, err)
	}
	return o.IsAncestor(c)
}

// alsoPush pushes the commit, now on the push branch, to opts.AlsoPushTo.
func (s *Session) alsoPush(ctx context.Context, commit plumbing.Hash, opts WriteBackOptions) error {
	if opts.AlsoPushTo == "" {
		return nil
	}
	ref := plumbing.ReferenceName(opts.AlsoPushTo)
	if err := s.push(ctx, commit, ref, opts.PushOptions); err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fmt.Errorf("pushing %s to %s: %w", commit, ref, err)
	}
	return nil
}
