package controllers

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/gitrepo"
	"github.com/uprev-dev/uprev/internal/outbound"
)

// TestGitErrorSortsEveryGitFailure pins the one mapping of Git failures to
// conditions, which Syncs, UpdateAutomations and gitTags ReleaseSources
// share: what gitrepo.Access and the Git operations return, wrapped as
// callers wrap it, gets one outcome and reason.
func TestGitErrorSortsEveryGitFailure(t *testing.T) {
	type outcome struct{ kind, reason string }
	for _, tc := range []struct {
		name string
		err  error
		want outcome
	}{
		{"a URL Git cannot read", fmt.Errorf("spec.git.url: %w", gitrepo.ErrInvalidURL), outcome{"stalled", uprevv1.InvalidSpecReason}},
		{"a denied address", fmt.Errorf("fetching https://git.example.com: %w", outbound.ErrDenied), outcome{"stalled", uprevv1.InvalidSpecReason}},
		{"a Secret that cannot work", fmt.Errorf("%w: password without username", gitrepo.ErrInvalidSecret), outcome{"transient", uprevv1.AuthenticationFailedReason}},
		{"refused credentials", fmt.Errorf("fetching: %w", gitrepo.ErrAuthentication), outcome{"transient", uprevv1.AuthenticationFailedReason}},
		{"an unknown host key", gitrepo.ErrUnknownHostKey, outcome{"transient", uprevv1.AuthenticationFailedReason}},
		{"a timeout", fmt.Errorf("%w: no answer", gitrepo.ErrTimeout), outcome{"transient", uprevv1.GitTimeoutReason}},
		{"a bad commit", &gitrepo.BadCommitError{}, outcome{"degraded", uprevv1.BadCommitReason}},
		{"anything else", errors.New("connection reset"), outcome{"transient", uprevv1.GitOperationFailedReason}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := gitError(tc.err)
			var got outcome
			var st *stalledError
			var tr *transientError
			var dg *degradedError
			switch {
			case errors.As(err, &st):
				got = outcome{"stalled", st.reason}
			case errors.As(err, &tr):
				got = outcome{"transient", tr.reason}
			case errors.As(err, &dg):
				got = outcome{"degraded", dg.reason}
			}
			g.Expect(got).To(Equal(tc.want))
			g.Expect(err).To(MatchError(tc.err))
		})
	}
}
