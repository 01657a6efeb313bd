package gitrepo_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

func TestUpdateTrailers(t *testing.T) {
	g := NewWithT(t)
	updates := []gitrepo.Update{
		{Policy: "uprev-system/agent", Old: "1.4.1", New: "1.4.2"},
		{Policy: "apps/chart", Old: "3.7.0", New: "3.7.1@sha256:abc"},
		{Policy: "apps/new", New: "1.0.0"},
	}
	g.Expect(gitrepo.FormatUpdateTrailer(updates[0])).To(Equal("Uprev-Update: uprev-system/agent 1.4.1 --> 1.4.2"))
	g.Expect(gitrepo.FormatUpdateTrailer(updates[2])).To(Equal("Uprev-Update: apps/new --> 1.0.0"))

	msg := "Update images\n\nagent: 1.4.1 --> 1.4.2\n\n"
	for _, u := range updates {
		msg += gitrepo.FormatUpdateTrailer(u) + "\n"
	}
	g.Expect(gitrepo.ParseUpdateTrailers(msg)).To(Equal(updates))
	g.Expect(gitrepo.ParseUpdateTrailers("Update images\n\nagent: 1.4.1 --> 1.4.2\nX-Uprev-Update: a/b 1 --> 2\n")).To(BeEmpty())
}

// FuzzParseUpdateTrailers checks that an update trailer whose fields hold
// no white space reads back as the update it was formatted from.
func FuzzParseUpdateTrailers(f *testing.F) {
	f.Add("uprev-system/agent", "1.4.1", "1.4.2")
	f.Add("a/b", "", "2")
	f.Fuzz(func(t *testing.T, policy, old, new string) {
		u := gitrepo.Update{Policy: policy, Old: old, New: new}
		parsed := gitrepo.ParseUpdateTrailers("subject\n\n" + gitrepo.FormatUpdateTrailer(u) + "\n")
		if !validField(policy) || !validField(new) || (old != "" && !validField(old)) || old == "-->" {
			return
		}
		if len(parsed) != 1 || parsed[0] != u {
			t.Fatalf("round trip of %#v gave %#v", u, parsed)
		}
	})
}

// validField reports whether s can be a trailer field: not empty, no white
// space.
func validField(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f' {
			return false
		}
	}
	return true
}

// updateMessage is an automation commit message for updates.
func updateMessage(updates ...gitrepo.Update) string {
	msg := "Update images\n"
	for i, u := range updates {
		if i == 0 {
			msg += "\n"
		}
		msg += gitrepo.FormatUpdateTrailer(u) + "\n"
	}
	return msg
}

func TestHoldsFromReverts(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)
	cache := newCache(t)

	agent := gitrepo.Update{Policy: "uprev-system/agent", Old: "1.4.1", New: "1.4.2"}
	app := gitrepo.Update{Policy: "uprev-system/app", Old: "2.0.0", New: "2.1.0"}
	both := srv.CommitFile(t, "fleet", "main", agentPath, "image: ghcr.io/acme/agent:1.4.2\n", updateMessage(agent, app))
	human := srv.CommitFile(t, "fleet", "main", "README.md", "# fleet!\n", "Edit README")

	holdsOf := func() []gitrepo.Hold {
		s := open(t, cache, remote, "main", "")
		defer s.Close()
		holds, err := s.Holds(gitrepo.HoldOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return holds
	}
	g.Expect(holdsOf()).To(BeEmpty())

	// A revert of a commit without trailers holds nothing.
	srv.Revert(t, "fleet", "main", human)
	g.Expect(holdsOf()).To(BeEmpty())

	revert := srv.Revert(t, "fleet", "main", both)
	g.Expect(holdsOf()).To(ConsistOf(
		gitrepo.Hold{Policy: "uprev-system/agent", Version: "1.4.2", RevertedIn: revert},
		gitrepo.Hold{Policy: "uprev-system/app", Version: "2.1.0", RevertedIn: revert},
	))

	// A revert of the revert ends the holds.
	reapply := srv.Revert(t, "fleet", "main", revert)
	g.Expect(holdsOf()).To(BeEmpty())

	// Reverting that again brings the first revert, and its holds, back.
	srv.Revert(t, "fleet", "main", reapply)
	g.Expect(holdsOf()).To(ConsistOf(
		gitrepo.Hold{Policy: "uprev-system/agent", Version: "1.4.2", RevertedIn: revert},
		gitrepo.Hold{Policy: "uprev-system/app", Version: "2.1.0", RevertedIn: revert},
	))
}

func TestHoldsBounds(t *testing.T) {
	g := NewWithT(t)
	srv := gitserver.Start(t)
	remote := newRemote(t, srv.InitRepo(t, "fleet", "main", seedFiles), nil)

	agent := gitrepo.Update{Policy: "uprev-system/agent", Old: "1.4.1", New: "1.4.2"}
	update := srv.CommitFile(t, "fleet", "main", agentPath, "image: ghcr.io/acme/agent:1.4.2\n", updateMessage(agent))
	revert := srv.Revert(t, "fleet", "main", update)
	later := srv.CommitFile(t, "fleet", "main", "README.md", "# fleet!\n", "Edit README")
	srv.CommitFile(t, "fleet", "main", "README.md", "# fleet!!\n", "Edit README again")

	s := open(t, newCache(t), remote, "main", "")
	hold := gitrepo.Hold{Policy: "uprev-system/agent", Version: "1.4.2", RevertedIn: revert}
	for name, tc := range map[string]struct {
		opts gitrepo.HoldOptions
		want []gitrepo.Hold
	}{
		"default depth":      {gitrepo.HoldOptions{}, []gitrepo.Hold{hold}},
		"deep enough":        {gitrepo.HoldOptions{MaxCommits: 3}, []gitrepo.Hold{hold}},
		"too shallow":        {gitrepo.HoldOptions{MaxCommits: 2}, nil},
		"since before":       {gitrepo.HoldOptions{Since: update}, []gitrepo.Hold{hold}},
		"since after revert": {gitrepo.HoldOptions{Since: later}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			holds, err := s.Holds(tc.opts)
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			NewWithT(t).Expect(holds).To(Equal(tc.want))
		})
	}
	g.Expect(s.Holds(gitrepo.HoldOptions{MaxCommits: 1})).To(BeEmpty())
}
