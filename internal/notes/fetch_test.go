package notes

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
)

// TestFetchReleasesBetweenVersions: the releases after the old version up
// to the new one, every one of them, newest first, drafts and versions
// outside the span left out, over several pages; a second ask for the same
// source and versions reads no page again; a failure is remembered for a
// while, then asked again.
func TestFetchReleasesBetweenVersions(t *testing.T) {
	gh := githubapi.StartReleases(t)
	var releases []githubapi.Release
	for _, tag := range []string{"v2.0.0", "v1.4.0", "v1.3.1-draft", "v1.3.0", "v1.0.9", "v1.2.0"} {
		releases = append(releases, githubapi.Release{TagName: tag, HTMLURL: "https://github.com/acme/agent/releases/tag/" + tag,
			Body: "notes of " + tag, Draft: strings.HasSuffix(tag, "-draft")})
	}
	for i := range 150 { // older releases, on later pages
		releases = append(releases, githubapi.Release{TagName: "v0.0." + string(rune('0'+i%10)), Body: "old"})
	}
	releases = append(releases[:6], append([]githubapi.Release{{TagName: "v1.1.0", Body: "notes of v1.1.0"}}, releases[6:]...)...)
	gh.SetReleases("acme/agent", releases...)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	api := API{URL: gh.URL}
	f := NewFetcher(outbound.Denylist{}.Client(5*time.Second), clk)
	ctx := context.Background()

	got, err := f.Releases(ctx, api, "https://github.example/acme/agent", "1.1.0", "1.4.0")
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, r := range got {
		tags = append(tags, r.Tag+"="+r.Body)
	}
	want := "v1.4.0=notes of v1.4.0 v1.3.0=notes of v1.3.0 v1.2.0=notes of v1.2.0"
	if strings.Join(tags, " ") != want {
		t.Errorf("releases %v, want %s", tags, want)
	}
	if f.Pages() != 1 {
		t.Errorf("%d pages read, want 1 (the old version is on the first)", f.Pages())
	}
	if _, err := f.Releases(ctx, api, "https://github.example/acme/agent", "1.1.0", "1.4.0"); err != nil || f.Pages() != 1 {
		t.Errorf("asked again: %d pages read (want 1), %v", f.Pages(), err)
	}

	// A version with no release of its own: every page is read, once.
	if _, err := f.Releases(ctx, api, "https://github.example/acme/agent", "0.9.0", "1.0.9"); err != nil || f.Pages() != 3 {
		t.Errorf("old version without a release: %d pages read in all, want 3; %v", f.Pages(), err)
	}

	_, err = f.Releases(ctx, api, "https://github.example/acme/gone", "1.0.0", "1.1.0")
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("missing repository: %v", err)
	}
	if _, err2 := f.Releases(ctx, api, "https://github.example/acme/gone", "1.0.0", "1.1.0"); err2 == nil || f.Pages() != 4 {
		t.Errorf("failure not remembered: %d pages, %v", f.Pages(), err2)
	}
	clk.SetTime(clk.Now().Add(failureTTL))
	if _, err := f.Releases(ctx, api, "https://github.example/acme/gone", "1.0.0", "1.1.0"); err == nil || f.Pages() != 5 {
		t.Errorf("failure not asked again after %s: %d pages, %v", failureTTL, f.Pages(), err)
	}
	if _, err := f.Releases(ctx, API{}, "https://gitlab.example/acme/agent", "1.0.0", "1.1.0"); err == nil || !strings.Contains(err.Error(), ErrNoAPI.Error()) {
		t.Errorf("unknown host: %v", err)
	}
}

// TestFetchDeniedAndBounded: a fetch goes through the outbound client (a
// denied address is refused) and an answer past the bound is refused.
func TestFetchDeniedAndBounded(t *testing.T) {
	gh := githubapi.StartReleases(t)
	gh.SetReleases("acme/big", githubapi.Release{TagName: "v1.1.0", Body: strings.Repeat("x", maxAnswerBytes)})
	clk := clocktesting.NewFakePassiveClock(time.Now())
	api := API{URL: gh.URL}
	deny, err := outbound.Parse([]string{"127.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	denied := NewFetcher(deny.Client(5*time.Second), clk)
	if _, err := denied.Releases(context.Background(), api, "https://github.example/acme/big", "1.0.0", "1.1.0"); err == nil || !strings.Contains(err.Error(), "the operator denies") {
		t.Errorf("denied address: %v", err)
	}
	// A deadline long enough for 16 MiB under -race on a loaded machine:
	// the bound, not the deadline, must end this read.
	f := NewFetcher(outbound.Denylist{}.Client(time.Minute), clk)
	if _, err := f.Releases(context.Background(), api, "https://github.example/acme/big", "1.0.0", "1.1.0"); err == nil || !strings.Contains(err.Error(), "larger than 16 MiB") {
		t.Errorf("answer past the bound: %v", err)
	}
}

// TestFetchFromAHostThatNeverAnswers: a notes host that accepts the
// request and never answers costs the caller its deadline, no more.
func TestFetchFromAHostThatNeverAnswers(t *testing.T) {
	stuck := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, req *http.Request) { <-req.Context().Done() }))
	t.Cleanup(stuck.Close)
	f := NewFetcher(outbound.Denylist{}.Client(time.Minute), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := f.Releases(ctx, API{URL: stuck.URL}, "https://github.example/acme/agent", "1.0.0", "1.1.0")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want the deadline's", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s, the deadline was 300ms", took)
	}
}
