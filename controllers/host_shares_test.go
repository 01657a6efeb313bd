package controllers

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

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

func TestGitShareKey(t *testing.T) {
	for url, want := range map[string]string{
		"https://user:pw@git.example.com/fleet.git": "Git server git.example.com",
		"ssh://git@git.example.com:2222/fleet.git":  "Git server git.example.com:2222",
		"git@github.com:acme/fleet.git":             "Git server github.com",
		"http://127.0.0.1:3000/x":                   "Git server 127.0.0.1:3000",
	} {
		NewWithT(t).Expect(gitShareKey(url, "")).To(Equal(want), url)
	}
	NewWithT(t).Expect(gitShareKey("https://git.example.com/x", "proxy.internal:3128")).To(Equal("Git server git.example.com via proxy proxy.internal:3128"))
}
