package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/update"
)

// translate reads the automation and its GitRepository as the run of an
// UpdateAutomation; see fluxAutomation for what maps to what.
func (r *ImageUpdateAutomationReconciler) translate(ctx context.Context, obj *iacv1.ImageUpdateAutomation) (*automationRun, error) {
	ref := obj.Spec.SourceRef
	if ref.Kind != "" && ref.Kind != sourcev1.GitRepositoryKind {
		return nil, stalledf(iacv1.InvalidSourceConfigReason, "spec.sourceRef.kind %q is not supported: only GitRepository is", ref.Kind)
	}
	key := types.NamespacedName{Namespace: cmp.Or(ref.Namespace, obj.Namespace), Name: ref.Name}
	if r.NoCrossNamespaceRefs && key.Namespace != obj.Namespace {
		return nil, stalledf(uprevv1.InvalidSpecReason, "spec.sourceRef: cannot read GitRepository %s: references to other namespaces are turned off (--no-cross-namespace-refs)", key)
	}
	repo := &sourcev1.GitRepository{}
	if err := r.sources.Get(ctx, key, repo); err != nil {
		switch {
		case meta.IsNoMatchError(err):
			return nil, transient(iacv1.SourceManagerFailedReason, fmt.Errorf(
				"the GitRepository kind (source.toolkit.fluxcd.io/v1) is not installed: install source-controller, or only its CRD (docs/migrate-from-flux.md)"))
		case apierrors.IsNotFound(err):
			return nil, transient(iacv1.SourceManagerFailedReason, fmt.Errorf("GitRepository %s not found", key))
		}
		return nil, fmt.Errorf("reading GitRepository %s: %w", key, err)
	}
	run, err := fluxAutomation(obj, repo)
	if err != nil {
		return nil, err
	}
	run.front.gitShares = r.gitShares
	if ref := repo.Spec.ProxySecretRef; ref != nil {
		if run.front.gitProxy, err = secretData(ctx, r.Client, repo.Namespace, ref.Name); err != nil {
			return nil, err
		}
	}
	if prev, ok := r.engineStatus.Load(client.ObjectKeyFromObject(obj)); ok {
		engine := prev.(uprevv1.UpdateAutomationStatus)
		st := &run.auto.Status
		st.ObservedPushRevision, st.Holds, st.RefusedDowngrades = engine.ObservedPushRevision, engine.Holds, engine.RefusedDowngrades
		st.PullRequest, st.PullRequests = engine.PullRequest, engine.PullRequests
	}
	return run, nil
}

// fluxAutomation reads an ImageUpdateAutomation and its GitRepository as
// an UpdateAutomation run: the GitRepository's url and secretRef (read in
// its namespace), the checkout ref (the automation's, else the
// GitRepository's, else Flux's default branch), which must be a branch;
// push.branch, refspec and options; author, signing key and Flux's message
// template with its values; update.path; policySelector; interval.
// Status starts from the automation's, so that a run with nothing new
// since the last is recognised.
func fluxAutomation(obj *iacv1.ImageUpdateAutomation, repo *sourcev1.GitRepository) (*automationRun, error) {
	spec := obj.Spec
	if spec.GitSpec == nil {
		return nil, stalledf(iacv1.InvalidSourceConfigReason, "spec.git is required with a GitRepository source")
	}
	gitSpec := spec.GitSpec
	switch repo.Spec.Provider {
	case "", sourcev1.GitProviderGeneric, sourcev1.GitProviderGitHub:
	default:
		return nil, stalledf(iacv1.InvalidSourceConfigReason, "GitRepository %s/%s: provider %q is not supported by uprev for Git; use a Secret with a token or a GitHub App", repo.Namespace, repo.Name, repo.Spec.Provider)
	}
	branch, err := fluxCheckoutBranch(gitSpec, repo)
	if err != nil {
		return nil, err
	}
	auto := &uprevv1.UpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: obj.Name, Generation: obj.Generation, Annotations: obj.Annotations},
		Spec: uprevv1.UpdateAutomationSpec{
			Interval:       spec.Interval,
			PolicySelector: spec.PolicySelector,
			Git: uprevv1.GitSpec{
				GitSource: uprevv1.GitSource{URL: repo.Spec.URL, SecretRef: repo.Spec.SecretRef, Ref: uprevv1.GitRef{Branch: branch}, Timeout: repo.Spec.Timeout},
				Commit: uprevv1.CommitSpec{
					Author: uprevv1.CommitUser{Name: gitSpec.Commit.Author.Name, Email: gitSpec.Commit.Author.Email},
				},
			},
		},
		Status: uprevv1.UpdateAutomationStatus{
			ObservedGeneration:     obj.Status.ObservedGeneration,
			LastPushCommit:         obj.Status.LastPushCommit,
			LastPushTime:           obj.Status.LastPushTime,
			ObservedSourceRevision: obj.Status.ObservedSourceRevision,
			ObservedPolicies:       uprevImageRefs(obj.Status.ObservedPolicies),
			Conditions:             obj.Status.Conditions,
		},
	}
	front := automationFront{kind: iacv1.ImageUpdateAutomationKind, object: obj, gitSecretNamespace: repo.Namespace}
	if key := gitSpec.Commit.SigningKey; key != nil {
		auto.Spec.Git.Commit.SigningKey = &uprevv1.SigningKey{SecretRef: key.SecretRef}
		front.signingKeyType = string(key.Type)
		if front.signingKeyType == "" {
			front.signingKeyType = string(iacv1.SigningKeyTypeGPG)
		}
	}
	if push := gitSpec.Push; push != nil {
		if push.Branch != "" && push.Branch != branch {
			auto.Spec.Git.Push = &uprevv1.PushSpec{Branch: push.Branch}
		}
		front.pushOptions = push.Options
		if push.Refspec != "" {
			if front.alsoPushTo, err = refspecTarget(push.Refspec, auto.PushBranch()); err != nil {
				return nil, err
			}
		}
	}
	if text, ok := obj.Annotations[uprevv1.PullRequestAnnotation]; ok {
		pr := &uprevv1.PullRequestSpec{}
		if err := yaml.UnmarshalStrict([]byte(text), pr); err != nil {
			return nil, stalledf(uprevv1.InvalidSpecReason, "annotation %s: %v", uprevv1.PullRequestAnnotation, err)
		}
		if auto.Spec.Git.Push == nil {
			return nil, stalledf(uprevv1.InvalidSpecReason, "annotation %s needs spec.git.push.branch to differ from the checkout branch %s: a pull request goes from the push branch into another", uprevv1.PullRequestAnnotation, branch)
		}
		auto.Spec.Git.Push.PullRequest = pr
	}
	if u := spec.Update; u != nil {
		if u.Strategy != "" && u.Strategy != iacv1.UpdateStrategySetters {
			return nil, stalledf(iacv1.InvalidUpdateStrategyReason, "spec.update.strategy %q is not supported: only Setters is", u.Strategy)
		}
		auto.Spec.Update.Path = u.Path
	}
	if front.message, err = fluxMessage(obj); err != nil {
		return nil, err
	}
	return &automationRun{auto: auto, front: front}, nil
}

// fluxCheckoutBranch returns the branch an ImageUpdateAutomation checks
// out. uprev writes on top of a branch only: a tag, semver range, ref name
// or commit is refused with a clear message.
func fluxCheckoutBranch(gitSpec *iacv1.GitSpec, repo *sourcev1.GitRepository) (string, error) {
	ref, field := repo.Spec.Reference, fmt.Sprintf("GitRepository %s/%s spec.ref", repo.Namespace, repo.Name)
	if gitSpec.Checkout != nil {
		ref, field = &gitSpec.Checkout.Reference, "spec.git.checkout.ref"
	}
	if ref == nil {
		return fluxDefaultBranch, nil
	}
	if ref.Tag != "" || ref.SemVer != "" || ref.Name != "" || ref.Commit != "" || ref.Branch == "" {
		return "", stalledf(uprevv1.InvalidSpecReason, "%s: uprev checks out only a branch (and writes on top of it); set branch alone", field)
	}
	return ref.Branch, nil
}

// fluxMessage returns the message function of an ImageUpdateAutomation:
// Flux's template, run on Flux's template data.
func fluxMessage(obj *iacv1.ImageUpdateAutomation) (messageFunc, error) {
	commit := obj.Spec.GitSpec.Commit
	t, err := update.ParseFluxMessageTemplate(commit.MessageTemplate)
	if err != nil {
		return nil, stalled(uprevv1.InvalidSpecReason, fmt.Errorf("spec.git.commit.messageTemplate: %w", err))
	}
	var path string
	if obj.Spec.Update != nil {
		path = obj.Spec.Update.Path
	}
	key := client.ObjectKeyFromObject(obj)
	return func(res update.Result, _ []string) (string, error) {
		msg, err := update.FluxCommitMessage(t, update.FluxMessageData{
			AutomationObject: key, Changed: update.NewFluxResult(res, path), Values: commit.MessageTemplateValues,
		})
		switch {
		case errors.Is(err, update.ErrRemovedTemplateField):
			return "", stalled(iacv1.RemovedTemplateFieldReason, fmt.Errorf("spec.git.commit.messageTemplate: %w", err))
		case err != nil:
			return "", stalled(uprevv1.InvalidSpecReason, fmt.Errorf("spec.git.commit.messageTemplate: %w", err))
		}
		return msg, nil
	}, nil
}

// fluxStatus returns the Flux status a run leaves, from the status the
// engine computed.
func fluxStatus(prev iacv1.ImageUpdateAutomationStatus, engine uprevv1.UpdateAutomationStatus) iacv1.ImageUpdateAutomationStatus {
	st := *prev.DeepCopy()
	st.LastPushCommit = engine.LastPushCommit
	st.LastPushTime = engine.LastPushTime
	st.ObservedSourceRevision = engine.ObservedSourceRevision
	st.ObservedPolicies = fluxImageRefs(engine.ObservedPolicies)
	return st
}

// uprevImageRefs converts Flux's observed policies to uprev's.
func uprevImageRefs(in iacv1.ObservedPolicies) map[string]uprevv1.ImageRef {
	if in == nil {
		return nil
	}
	out := make(map[string]uprevv1.ImageRef, len(in))
	for k, v := range in {
		out[k] = uprevv1.ImageRef{Name: v.Name, Tag: v.Tag, Digest: v.Digest}
	}
	return out
}

// fluxImageRefs converts uprev's observed policies to Flux's.
func fluxImageRefs(in map[string]uprevv1.ImageRef) iacv1.ObservedPolicies {
	if in == nil {
		return nil
	}
	out := make(iacv1.ObservedPolicies, len(in))
	for k, v := range in {
		out[k] = iacv1.ImageRef{Name: v.Name, Tag: v.Tag, Digest: v.Digest}
	}
	return out
}

// refspecTarget returns the ref Flux's spec.git.push.refspec pushes the
// automation's commit to besides the push branch (such as refs/for/main
// for Gerrit), "" when it names the push branch itself. Its source must be
// the push branch (as a branch name, refs/heads/<branch> or HEAD): uprev
// pushes only the commit it made.
func refspecTarget(refspec, pushBranch string) (string, error) {
	src, dst, found := strings.Cut(refspec, ":")
	if !found {
		dst = src
	}
	pushRef := "refs/heads/" + pushBranch
	if src != pushBranch && src != pushRef && src != "HEAD" {
		return "", stalledf(uprevv1.InvalidSpecReason, "spec.git.push.refspec %q: the source must be the push branch %s (or HEAD): uprev pushes only the commit it made", refspec, pushBranch)
	}
	if dst == "" || strings.HasPrefix(dst, "+") {
		return "", stalledf(uprevv1.InvalidSpecReason, "spec.git.push.refspec %q: a destination is required, and pushes are never forced", refspec)
	}
	if !strings.HasPrefix(dst, "refs/") {
		dst = "refs/heads/" + dst
	}
	if dst == pushRef {
		return "", nil
	}
	return dst, nil
}
