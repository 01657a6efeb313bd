package controllers

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/forge"
	"github.com/uprev-dev/uprev/internal/notes"
	"github.com/uprev-dev/uprev/internal/update"
)

// notesTimeout bounds the finding of all release notes of one pull
// request: a notes host that does not answer delays the pull request by
// this much at most, and never the commit, which is pushed before.
const notesTimeout = 20 * time.Second

// bodyReserve is kept free of notes, for what the forge or a person adds.
const bodyReserve = 1024

// pullRequestBody is the body of the pull request: desc's, with the
// warnings of the CRDs this run wrote, and the release notes of its
// updates within the forge's limit.
func (r *UpdateAutomationReconciler) pullRequestBody(ctx context.Context, run *automationRun, desc forge.Description, api notes.API) string {
	if desc.Head == run.commit {
		desc.Warnings = crdWarnings(run)
	}
	if r.Notes == nil || len(desc.Updates) == 0 {
		return forge.Body(desc)
	}
	ctx, cancel := context.WithTimeout(ctx, notesTimeout)
	defer cancel()
	changes := r.releaseNotes(ctx, run, desc.Updates, api)
	desc.Notes = notes.Render(changes, notes.MaxBodyChars-bodyReserve-len(forge.Body(desc)))
	return forge.Body(desc)
}

// releaseNotes are the notes of the image updates of the pull request:
// the releases, between the old and the new version, of the repository
// the new version's org.opencontainers.image.source names, and a compare
// link of the two versions' org.opencontainers.image.revision. Nothing
// here fails the pull request: what cannot be found is said in its notes.
// Sources on the pull request's forge host are read with its API and
// token (api), those on github.com with GitHub's public API. The updates
// of ReleaseSources have their own (sourceNotes).
func (r *UpdateAutomationReconciler) releaseNotes(ctx context.Context, run *automationRun, updates []forge.Update, api notes.API) []notes.Change {
	var out []notes.Change
	for _, u := range updates {
		key := update.ParsePolicyKey(u.Policy)
		if rs, ok := run.sources[key]; ok && key.Kind == update.SourceKind {
			out = append(out, r.sourceNotes(ctx, rs, u, api))
			continue
		}
		pol, ok := run.policies[key]
		if !ok || key.Kind != "" {
			continue
		}
		c := notes.Change{Title: fmt.Sprintf("%s: %s --> %s", u.Policy, u.Old, u.New), Checked: r.checkedLines(ctx, pol, u.New)}
		if reg, image, err := r.policyRegistry(ctx, pol); err != nil {
			c.Missing = "reading the image's labels: " + err.Error()
		} else {
			r.Notes.ImageNotes(ctx, &c, reg, image, u.Old, u.New, func(source string) notes.API { return notesAPI(source, api, r.GitHubReleases) })
		}
		out = append(out, c)
	}
	return out
}

// policyRegistry is a registry client with the access of pol's
// ImageRepository, and its image.
func (r *UpdateAutomationReconciler) policyRegistry(ctx context.Context, pol *imagev1.ImagePolicy) (notes.Registry, string, error) {
	repo, err := allowedRepository(ctx, r.Client, pol, r.NoCrossNamespaceRefs)
	if err != nil {
		return nil, "", err
	}
	client, err := registryClient(ctx, r.Client, r.Scanner, repo, cloudIdentity{Tokens: r.TokenCache, DefaultServiceAccount: r.DefaultServiceAccount})
	if err != nil {
		return nil, "", err
	}
	return client, repo.Spec.Image, nil
}

// forgeNotesAPI is the API of the pull request's forge for release notes,
// with its token.
func forgeNotesAPI(spec *uprevv1.PullRequestSpec, token string) notes.API {
	switch forge.Provider(spec.Provider) {
	case forge.GitLab:
		return notes.API{Kind: notes.GitLab, URL: cmp.Or(spec.URL, forge.DefaultGitLabURL), Token: token}
	case forge.Gitea:
		return notes.API{Kind: notes.Gitea, URL: spec.URL, Token: token}
	}
	return notes.API{Kind: notes.GitHub, URL: cmp.Or(spec.URL, forge.DefaultGitHubURL), Token: token}
}

// notesAPI is the API that serves the releases of source: the pull
// request's forge API, with its token, for a source on its host (api);
// github, GitHub's public API, for one on github.com; gitlab.com's for one
// there; none for others, so that a label names no host uprev then calls.
func notesAPI(source string, api, github notes.API) notes.API {
	host := notes.SourceHost(source)
	switch {
	case api.URL != "" && host == hostOf(api.URL):
		return api
	case host == "github.com" && api.URL == forge.DefaultGitHubURL:
		return api
	case host == "github.com":
		return github
	case host == "gitlab.com":
		return notes.GitLabAPI
	}
	return notes.API{}
}

// hostOf is the host of an API URL.
func hostOf(apiURL string) string {
	rest, ok := strings.CutPrefix(apiURL, "https://")
	if !ok {
		rest, _ = strings.CutPrefix(apiURL, "http://")
	}
	host, _, _ := strings.Cut(rest, "/")
	return host
}
