package source

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
)

// releasesOf returns n releases v1.0.<n-1> ... v1.0.0, newest first.
func releasesOf(n int) []githubapi.Release {
	var rs []githubapi.Release
	for i := n - 1; i >= 0; i-- {
		rs = append(rs, githubapi.Release{TagName: fmt.Sprintf("v1.0.%d", i), HTMLURL: fmt.Sprintf("https://github.com/o/r/releases/tag/v1.0.%d", i)})
	}
	return rs
}

func TestListGitHubReleasesDraftsNeverPrereleasesByPolicy(t *testing.T) {
	g := NewWithT(t)
	api := githubapi.StartReleases(t)
	api.SetReleases("cli/cli",
		githubapi.Release{TagName: "v3.0.0", Draft: true},
		githubapi.Release{TagName: "v2.1.0", Prerelease: true, HTMLURL: "https://github.com/cli/cli/releases/tag/v2.1.0"},
		githubapi.Release{TagName: "v2.0.0", HTMLURL: "https://github.com/cli/cli/releases/tag/v2.0.0"},
	)
	listing, err := NewClient(Options{}).ListGitHubReleases(context.Background(), "ns/gh", Access{}, api.URL, "cli/cli")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listing.Names()).To(Equal([]string{"v2.1.0", "v2.0.0"}), "a draft was listed")

	v, err := Select(imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}}, nil, listing.Versions)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Version).To(Equal("v2.0.0"))
	g.Expect(v.URL).To(Equal("https://github.com/cli/cli/releases/tag/v2.0.0"))

	v, err = Select(imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0-0"}}, nil, listing.Versions)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Version).To(Equal("v2.1.0"))
}

// Pages are followed by their Link header; an unchanged list costs one
// conditional request per page, answered 304, which GitHub does not count
// against the rate limit.
func TestListGitHubReleasesPagesAndConditionalRequests(t *testing.T) {
	g := NewWithT(t)
	api := githubapi.StartReleases(t)
	api.SetReleases("o/r", releasesOf(250)...)
	api.RequireToken("ghp_token")
	c := NewClient(Options{})
	access := Access{Secret: map[string][]byte{"bearerToken": []byte("ghp_token")}}
	first, err := c.ListGitHubReleases(context.Background(), "ns/gh", access, api.URL, "o/r")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.Versions).To(HaveLen(250))
	g.Expect(first.NotModified).To(BeFalse())
	g.Expect(api.Requests()).To(HaveLen(3))

	second, err := c.ListGitHubReleases(context.Background(), "ns/gh", access, api.URL, "o/r")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second.NotModified).To(BeTrue())
	g.Expect(second.Names()).To(Equal(first.Names()))
	reqs := api.Requests()[3:]
	g.Expect(reqs).To(HaveLen(3))
	for _, r := range reqs {
		g.Expect(r.Header.Get("If-None-Match")).NotTo(BeEmpty())
	}

	api.SetReleases("o/r", releasesOf(251)...)
	third, err := c.ListGitHubReleases(context.Background(), "ns/gh", access, api.URL, "o/r")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(third.NotModified).To(BeFalse())
	g.Expect(third.Names()).To(ContainElement("v1.0.250"))
}

// A used-up rate limit is a *RateLimitError with the wait until GitHub's
// reset, not an authentication failure.
func TestListGitHubReleasesHonoursTheRateLimit(t *testing.T) {
	g := NewWithT(t)
	api := githubapi.StartReleases(t)
	api.SetReleases("o/r", releasesOf(3)...)
	now := time.Unix(1_800_000_000, 0)
	api.SetRateLimit(0, now.Add(17*time.Minute))
	_, err := NewClient(Options{Clock: clocktesting.NewFakePassiveClock(now)}).ListGitHubReleases(context.Background(), "ns/gh", Access{}, api.URL, "o/r")
	var limited *RateLimitError
	g.Expect(errors.As(err, &limited)).To(BeTrue(), "%v", err)
	g.Expect(limited.RetryAfter).To(Equal(17 * time.Minute))
	g.Expect(errors.Is(err, ErrUnauthorized)).To(BeFalse())
}

func TestListGitHubReleasesBadCredentials(t *testing.T) {
	g := NewWithT(t)
	api := githubapi.StartReleases(t)
	api.SetReleases("o/r", releasesOf(1)...)
	api.RequireToken("right")
	_, err := NewClient(Options{}).ListGitHubReleases(context.Background(), "ns/gh",
		Access{Secret: map[string][]byte{"bearerToken": []byte("wrong")}}, api.URL, "o/r")
	g.Expect(errors.Is(err, ErrUnauthorized)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).NotTo(ContainSubstring("wrong"))
}
