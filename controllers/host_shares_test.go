package controllers

import (
	"context"
	"errors"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/forge"
	"github.com/uprev-dev/uprev/internal/gitrepo"
)

// TestGitShareOfADeadServer: a Git server holds at most half the workers;
// once a run finds it timed out, one run at a time tries it, and the
// others are put off saying why, not Ready; an answer ends the probation.
func TestGitShareOfADeadServer(t *testing.T) {
	g := NewWithT(t)
	shares := newWorkerShares(4)
	now := time.Unix(1000, 0)
	obj := func(ns string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: "apps"} }
	const url = "https://git.example.com/fleet.git"

	first, err := takeGitShare(shares, now, obj("a"), url, "")
	g.Expect(err).NotTo(HaveOccurred())
	second, err := takeGitShare(shares, now, obj("b"), url, "")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = takeGitShare(shares, now, obj("c"), url, "")
	var wait *waitingError
	g.Expect(errors.As(err, &wait)).To(BeTrue(), "half the workers: the third waits, %v", err)
	g.Expect(err.Error()).To(ContainSubstring("Git server git.example.com"))
	g.Expect(outcome{err: err}.putOff()).To(BeTrue())
	other, err := takeGitShare(shares, now, obj("c"), "https://other.example.com/x.git", "")
	g.Expect(err).NotTo(HaveOccurred(), "another server has its own share")
	other(nil)

	timeout := errors.Join(gitrepo.ErrTimeout, errors.New("no answer from git.example.com within 3s"))
	first(timeout)
	second(timeout)
	again, err := takeGitShare(shares, now, obj("d"), url, "")
	g.Expect(err).NotTo(HaveOccurred(), "one run tries the dead server")
	_, err = takeGitShare(shares, now, obj("e"), url, "")
	var retry *transientError
	g.Expect(errors.As(err, &retry)).To(BeTrue(), "%v", err)
	g.Expect(retry.reason).To(Equal("GitTimeout"))
	g.Expect(err.Error()).To(And(ContainSubstring("git.example.com"), ContainSubstring("within 3s")))
	g.Expect(outcome{err: err}.putOff()).To(BeTrue(), "a request waits for the run that tries")

	again(errors.New("authentication required")) // an answer, even a refusal
	for _, ns := range []string{"f", "g"} {
		_, err := takeGitShare(shares, now, obj(ns), url, "")
		g.Expect(err).NotTo(HaveOccurred(), "the server answered: half the workers again")
	}
}

func TestHostShareKey(t *testing.T) {
	repo := func(image, proxySecret string) *imagev1.ImageRepository {
		r := &imagev1.ImageRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "team"}, Spec: imagev1.ImageRepositorySpec{Image: image}}
		if proxySecret != "" {
			r.Spec.ProxySecretRef = &meta.LocalObjectReference{Name: proxySecret}
		}
		return r
	}
	for _, tc := range []struct{ name, got, want string }{
		{"git https, credentials dropped", gitShareKey("https://user:pw@git.example.com/fleet.git", ""), "Git server git.example.com"},
		{"git ssh with port", gitShareKey("ssh://git@git.example.com:2222/fleet.git", ""), "Git server git.example.com:2222"},
		{"git scp-like", gitShareKey("git@github.com:acme/fleet.git", ""), "Git server github.com"},
		{"git http address", gitShareKey("http://127.0.0.1:3000/x", ""), "Git server 127.0.0.1:3000"},
		{"git via proxy", gitShareKey("https://git.example.com/x", "proxy.internal:3128"), "Git server git.example.com via proxy proxy.internal:3128"},
		{"registry", registryShareKey(repo("ghcr.io/acme/app", "")), "registry ghcr.io"},
		{"registry with port", registryShareKey(repo("localhost:5000/app", "")), "registry localhost:5000"},
		{"registry via proxy", registryShareKey(repo("ghcr.io/acme/app", "corp-proxy")), "registry ghcr.io via proxy Secret team/corp-proxy"},
		{"source", hostShareKey("source server", urlHost("https://charts.example.com:8443/index.yaml"), ""), "source server charts.example.com:8443"},
		{"forge default GitHub", hostShareKey("forge", urlHost(forgeAPIURL(&uprevv1.PullRequestSpec{Provider: "github"})), ""), "forge api.github.com"},
		{"forge default GitLab", hostShareKey("forge", urlHost(forgeAPIURL(&uprevv1.PullRequestSpec{Provider: "gitlab"})), ""), "forge gitlab.com"},
		{"forge Gitea", hostShareKey("forge", urlHost(forgeAPIURL(&uprevv1.PullRequestSpec{Provider: "gitea", URL: "https://gitea.corp:3000/"})), ""), "forge gitea.corp:3000"},
	} {
		NewWithT(t).Expect(tc.got).To(Equal(tc.want), tc.name)
	}
}

// A forge that does not answer holds at most its share of the workers:
// the run finds it taken and is put off, and another forge is free.
func TestForgeShare(t *testing.T) {
	g := NewWithT(t)
	shares := newWorkerShares(4)
	now := time.Unix(0, 0)
	obj := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: name, Name: name} }
	first, err := takeForgeShare(shares, now, obj("a"), "https://forge.example.com/api")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = takeForgeShare(shares, now, obj("b"), "https://forge.example.com/api")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = takeForgeShare(shares, now, obj("c"), "https://forge.example.com/api")
	g.Expect(err).To(MatchError(ContainSubstring("forge forge.example.com already holds its share")))
	g.Expect(outcome{err: err}.putOff()).To(BeTrue(), "a request is not handled by a run put off for a forge")
	_, err = takeForgeShare(shares, now, obj("c"), forge.DefaultGitHubURL)
	g.Expect(err).NotTo(HaveOccurred(), "another forge is free")
	first(context.DeadlineExceeded)
	_, err = takeForgeShare(shares, now, obj("d"), "https://forge.example.com/api")
	g.Expect(err).To(MatchError(ContainSubstring("one run at a time")), "a forge that timed out is on probation")
}
