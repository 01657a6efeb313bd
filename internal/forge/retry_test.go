package forge

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestRetryAfterTakesTheForgesTime: a reset time is reckoned from the
// forge's Date when it sends one, whatever the manager's clock says, and
// from the manager's clock otherwise; Retry-After in seconds is taken as
// it is.
func TestRetryAfterTakesTheForgesTime(t *testing.T) {
	g := NewWithT(t)
	forgeNow := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	reset := strconv.FormatInt(forgeNow.Add(time.Hour).Unix(), 10)
	ahead := forgeNow.Add(20 * time.Minute)

	withDate := http.Header{"X-Ratelimit-Reset": {reset}, "Date": {forgeNow.Format(http.TimeFormat)}}
	g.Expect(retryAfter(withDate, ahead)).To(Equal(time.Hour))
	g.Expect(retryAfter(http.Header{"X-Ratelimit-Reset": {reset}}, ahead)).To(Equal(40*time.Minute), "no Date: the manager's clock")
	g.Expect(retryAfter(http.Header{"Retry-After": {"90"}, "Date": {forgeNow.Format(http.TimeFormat)}}, ahead)).To(Equal(90 * time.Second))
	g.Expect(retryAfter(http.Header{"X-Ratelimit-Reset": {reset}, "Date": {forgeNow.Add(2 * time.Hour).Format(http.TimeFormat)}}, ahead)).To(BeZero(), "a reset past")
}
