package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/update"
)

// automationFront is what the kind a run serves gives the write-back
// engine besides the UpdateAutomation it reads as: an UpdateAutomation
// itself, or Flux's ImageUpdateAutomation translated into one.
type automationFront struct {
	// kind is the kind served; it names the object's claim on the kept
	// clone and its tokens in the token cache.
	kind string
	// object is the object served; events are recorded on it.
	object client.Object
	// gitSecretNamespace is where spec.git.secretRef is read.
	gitSecretNamespace string
	// gitProxy is the data of a proxy Secret for Git traffic, nil for none.
	gitProxy map[string][]byte
	// gitShares are the Git shares of the kind's workers (takeGitShare).
	gitShares *workerShares
	// signingKeyType is "ssh" or "gpg" when the kind says which key of the
	// signing Secret to use; empty lets the Secret's keys tell.
	signingKeyType string
	// message writes a commit's message before uprev's trailers; nil
	// means the UpdateAutomation's messageTemplate.
	message messageFunc
	// pushOptions and alsoPushTo are passed to the write-back (see
	// gitrepo.WriteBackOptions).
	pushOptions map[string]string
	alsoPushTo  string
	// statusChanged, when set, hears of the status the run leaves before
	// its events are recorded, so that the object served carries it then.
	statusChanged func(uprevv1.UpdateAutomationStatus)
}

// messageFunc writes the message of a commit that made res and the CRD
// changes crdLines.
type messageFunc func(res update.Result, crdLines []string) (string, error)

// automationRun is the state one run's phases share.
type automationRun struct {
	auto  *uprevv1.UpdateAutomation
	front automationFront
	// progress reports long work in status.
	progress progressFunc
	// policies are the selected, ready policies by key.
	policies map[update.PolicyKey]*imagev1.ImagePolicy
	// planned are the same policies as the guard and the rewriter see them:
	// latest ref and ordering.
	planned map[update.PolicyKey]guard.Policy
	// sources are the selected, ready ReleaseSources by key.
	sources map[update.PolicyKey]*uprevv1.ReleaseSource
	// assets are the pinned asset values of the sources, as the rewriter
	// takes them.
	assets map[update.AssetKey]string
	// notReady names selected policies without a latest ref yet, and
	// unready has their labels: their groups are not gone.
	notReady []string
	unready  map[update.PolicyKey]map[string]string
	session  *gitrepo.Session
	// releaseGit gives back the run's Git share, told the run's error; nil
	// before it has one.
	releaseGit func(error)
	// rules are the write-back rules of the run, with the holds in force.
	rules *guard.Rules
	// crds are the CRD bundles read for this run.
	crds []*crdBundle
	// crdsRead and rewritten say which of the later phases ran to the end:
	// the CRD bundles were read, the marked files were rewritten.
	crdsRead, rewritten bool
	// unchanged says the run found nothing new since the last and did no
	// rewrite (see unchanged).
	unchanged bool
	// revisions are the branch tips once the write-back is done, empty
	// until then.
	revisions revisions
	// result is the rewrite that went into the pushed commit (or would
	// have, when nothing changed).
	result update.Result
	// crdLines are the commit message's lines about CRD bundles.
	crdLines []string
	commit   string
	// pr is what the pull request phase did.
	pr pullRequestRun
	// group is the group of changes a group's run writes, nil for the
	// run of an automation.
	group *pullRequestGroup
	// groups are the runs of the groups, when the automation groups its
	// changes (writeGroups), and groupNames the names of all its groups,
	// those of policies not ready included.
	groups     []*automationRun
	groupNames []string
	// retired are the groups' branches the run found with nothing left
	// to propose, retired or left for a person (retireGroup).
	retired []retiredGroup
}

// reconcile runs the phases in order; each wraps its error with what it was
// doing.
func (r *UpdateAutomationReconciler) reconcile(ctx context.Context, run *automationRun) (err error) {
	phases := []func(context.Context, *automationRun) error{
		r.validate,
		r.takeGitShare,
		r.selectPolicies,
		r.openRepository,
		r.writeGroups,
	}
	defer func() {
		if run.session != nil {
			run.session.Close()
		}
		if run.releaseGit != nil {
			run.releaseGit(err)
		}
	}()
	// Status follows whatever the run found, also when it stopped part-way.
	defer r.recordStatus(ctx, run)
	for _, phase := range phases {
		if err = phase(ctx, run); err != nil {
			return err
		}
	}
	if errs := run.result.FileErrors; len(errs) > 0 {
		return degraded(uprevv1.UpdateFailedReason, fmt.Errorf("%d files left as they were: %w", len(errs), run.result.Err()))
	}
	return nil
}

// validate checks what the spec alone can tell.
func (r *UpdateAutomationReconciler) validate(_ context.Context, run *automationRun) error {
	spec := run.auto.Spec
	if spec.Git.Ref.Branch == "" {
		return stalledf(uprevv1.InvalidSpecReason, "spec.git.ref.branch is required: an automation checks out and writes branches")
	}
	if _, err := policySelector(run.auto); err != nil {
		return stalled(uprevv1.InvalidSpecReason, fmt.Errorf("spec.policySelector: %w", err))
	}
	if run.front.message == nil {
		t, err := update.ParseMessageTemplate(spec.Git.Commit.MessageTemplate)
		if err != nil {
			return stalled(uprevv1.InvalidSpecReason, fmt.Errorf("spec.git.commit.messageTemplate: %w", err))
		}
		automation := run.auto.Namespace + "/" + run.auto.Name
		run.front.message = func(res update.Result, crdLines []string) (string, error) {
			msg, err := update.CommitMessage(t, update.CommitData{Automation: automation, Changes: res.Changes, Updates: res.Updates(), CRDs: crdLines})
			if err != nil {
				return "", stalled(uprevv1.InvalidSpecReason, fmt.Errorf("spec.git.commit.messageTemplate: %w", err))
			}
			return msg, nil
		}
	}
	return validatePullRequest(run.auto, run.front.gitSecretNamespace)
}

// selectPolicies reads the selected policies; those without a latest ref
// are skipped and reported, never written as empty.
func (r *UpdateAutomationReconciler) selectPolicies(ctx context.Context, run *automationRun) error {
	sel, _ := policySelector(run.auto)
	var list imagev1.ImagePolicyList
	if err := r.List(ctx, &list, client.InNamespace(run.auto.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return fmt.Errorf("listing image policies: %w", err)
	}
	run.planned, run.notReady = guard.PoliciesOf(list.Items)
	run.policies = map[update.PolicyKey]*imagev1.ImagePolicy{}
	run.unready = map[update.PolicyKey]map[string]string{}
	for i := range list.Items {
		pol := &list.Items[i]
		key := update.PolicyKey{Namespace: pol.Namespace, Name: pol.Name}
		if _, ready := run.planned[key]; ready {
			run.policies[key] = pol
		} else {
			run.unready[key] = pol.Labels
		}
	}
	// The same selector picks the ReleaseSources of the namespace.
	var sources uprevv1.ReleaseSourceList
	if err := r.List(ctx, &sources, client.InNamespace(run.auto.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return fmt.Errorf("listing release sources: %w", err)
	}
	planned, assets, notReady := guard.SourcesOf(sources.Items)
	maps.Copy(run.planned, planned)
	run.assets = assets
	run.notReady = append(run.notReady, notReady...)
	run.sources = map[update.PolicyKey]*uprevv1.ReleaseSource{}
	for i := range sources.Items {
		rs := &sources.Items[i]
		key := update.PolicyKey{Namespace: rs.Namespace, Name: rs.Name, Kind: update.SourceKind}
		if _, ready := planned[key]; ready {
			run.sources[key] = rs
		} else {
			run.unready[key] = rs.Labels
		}
	}
	return nil
}

// takeGitShare takes the run's share of the workers of its Git server
// and namespace for the rest of the run (takeGitShare). It comes before
// anything the run finds is recorded, so that a run put off leaves status
// as it was.
func (r *UpdateAutomationReconciler) takeGitShare(_ context.Context, run *automationRun) error {
	var proxy string
	if run.front.gitProxy != nil {
		if u, err := registry.ProxyURL(run.front.gitProxy); err == nil {
			proxy = u.Host
		}
	}
	release, err := takeGitShare(run.front.gitShares, r.Clock.Now(), client.ObjectKeyFromObject(run.auto), run.auto.Spec.Git.URL, proxy)
	if err != nil {
		return err
	}
	run.releaseGit = release
	return nil
}

// openRepository brings the kept clone up to date and locks it for the
// run; a clone in use puts the run off until it frees (openClone).
func (r *UpdateAutomationReconciler) openRepository(ctx context.Context, run *automationRun) error {
	front := run.front
	remote, err := gitRemote(ctx, r.Client, r.TokenCache, gitAccess{kind: front.kind, object: front.object, secretNamespace: front.gitSecretNamespace}, run.auto.Spec.Git.GitSource)
	if err != nil {
		return err
	}
	if front.gitProxy != nil {
		proxy, err := registry.ProxyURL(front.gitProxy)
		if err != nil {
			return stalled(uprevv1.InvalidSpecReason, fmt.Errorf("the proxy Secret: %w", err))
		}
		remote.UseProxy(proxy)
	}
	key := client.ObjectKeyFromObject(run.auto)
	run.session, err = r.Clones.Open(openClone(ctx, front.gitShares, key), remote, gitrepo.OpenOptions{
		Branch:     run.auto.Spec.Git.Ref.Branch,
		PushBranch: run.auto.PushBranch(),
		Owner:      objectID(front.kind, key),
	})
	if busy := cloneBusy(err); busy != nil {
		return busy
	}
	if err != nil {
		return gitError(fmt.Errorf("fetching %s: %w", remote.Redacted(), err))
	}
	return nil
}

// readHolds finds the versions people reverted, on the branch and on the
// push branch as fetched, and makes the run's rules, which tell whether
// anything is new since the last run and which CRD bundles to read. The
// write-back reads them again from the tip each attempt lands on.
func (r *UpdateAutomationReconciler) readHolds(_ context.Context, run *automationRun) error {
	rules, err := holdRules(run, run.session.History(gitrepo.HistoryOptions{}))
	if err != nil {
		return gitError(err)
	}
	run.rules = rules
	return nil
}

// holdRules makes the rules of a run from the reverts in history: holds
// stay in force while the policy still selects the held version and the
// annotation does not release them.
func holdRules(run *automationRun, history *gitrepo.History) (*guard.Rules, error) {
	auto := run.auto
	holds, err := guard.ReadHolds(history, auto.Spec.Git.Ref.Branch, auto.PushBranch())
	if err != nil {
		return nil, fmt.Errorf("reading reverts: %w", err)
	}
	return guard.New(guard.Input{
		Policies:       run.planned,
		Holds:          holds,
		Releases:       guard.ParseReleases(auto.Annotations[uprevv1.HoldReleaseAnnotation]),
		AllowDowngrade: auto.Spec.AllowDowngrade,
	}), nil
}

// writeBack rewrites the markers and pushes one commit when something
// changed.
func (r *UpdateAutomationReconciler) writeBack(ctx context.Context, run *automationRun) error {
	auto := run.auto
	if run.unchanged = unchanged(auto, run, revisionsOf(run.session)); run.unchanged {
		run.revisions = revisionsOf(run.session)
		return nil
	}
	signer, err := commitSigner(ctx, r.Client, auto, run.front.signingKeyType)
	if err != nil {
		return err
	}
	opts := gitrepo.WriteBackOptions{
		AuthorName:  auto.Spec.Git.Commit.Author.Name,
		AuthorEmail: auto.Spec.Git.Commit.Author.Email,
		Signer:      signer,
		PushOptions: run.front.pushOptions,
		AlsoPushTo:  run.front.alsoPushTo,
		Clock:       r.Clock,
	}
	// The edit runs again on the new tip after a rejected push: its rules
	// come from the history of that tip, so that a revert pushed in
	// between is held.
	edit := func(dir string, history *gitrepo.History) (gitrepo.Edit, error) {
		rules, err := holdRules(run, history)
		if err != nil {
			return gitrepo.Edit{}, err
		}
		run.rules = rules
		opts := update.Options{
			Policies:         run.rules.Refs(),
			Assets:           run.assets,
			DefaultNamespace: auto.Namespace,
			Guard:            run.rules.Check,
			Scans:            r.Scans,
		}
		// Only the files that hold a marker are read, as the index of
		// the commit's trees knows them.
		marked, known, err := run.session.FilesContaining(auto.Spec.Update.Path, update.MarkerTokens()...)
		if err != nil {
			return gitrepo.Edit{}, err
		}
		if known {
			opts.Only = marked
		}
		res, err := update.RewriteMarkers(ctx, dir, auto.Spec.Update.Path, opts)
		run.result = res
		run.rewritten = err == nil
		if err != nil {
			if errors.Is(err, update.ErrPathEscapesRoot) {
				return gitrepo.Edit{}, stalled(uprevv1.InvalidSpecReason, fmt.Errorf("spec.update.path: %w", err))
			}
			return gitrepo.Edit{}, err
		}
		crdLines, crdFiles, err := writeCRDs(dir, run, res)
		if err != nil {
			return gitrepo.Edit{}, err
		}
		run.crdLines = crdLines
		if !res.Changed() && len(crdFiles) == 0 {
			// Nothing written: the kept clone stays known clean.
			return gitrepo.Edit{Files: []string{}}, nil
		}
		message, err := commitMessage(run.front.message, res, crdLines)
		// The files written, so that the commit costs what changed.
		return gitrepo.Edit{Message: message, Files: append(res.Files(), crdFiles...)}, err
	}
	run.progress(ctx, "writing back to %s", auto.PushBranch())
	run.commit, err = run.session.WriteBack(ctx, opts, edit)
	if err != nil && run.commit != "" {
		// On the push branch, but not pushed to alsoPushTo.
		run.revisions = revisionsOf(run.session)
		return gitError(err)
	}
	if err != nil {
		var stall *stalledError
		if errors.As(err, &stall) {
			return err
		}
		return gitError(fmt.Errorf("writing back to %s: %w", auto.PushBranch(), err))
	}
	run.revisions = revisionsOf(run.session)
	return nil
}

// commitMessage writes the message of a run's commit: message's text, then
// one Uprev-Update trailer per policy update, which revert detection reads
// back.
func commitMessage(message messageFunc, res update.Result, crdLines []string) (string, error) {
	msg, err := message(res, crdLines)
	if err != nil {
		return "", err
	}
	updates := make([]guard.Update, 0, len(res.Updates()))
	for _, u := range res.Updates() {
		oldVersion, newVersion := u.Versions()
		updates = append(updates, guard.Update{Policy: u.Policy.String(), Old: oldVersion, New: newVersion})
	}
	return guard.AppendUpdateTrailers(msg, updates), nil
}
