package registry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/uprev-dev/uprev/internal/outbound"
)

var (
	// ErrUnauthorized means the registry refused the request for lack of
	// valid credentials or of permission (HTTP 401 or 403).
	ErrUnauthorized = errors.New("registry refused the credentials")
	// ErrNotFound means the registry has no such repository or tag (HTTP 404).
	ErrNotFound = errors.New("not found in the registry")
	// ErrTransient means a failure worth retrying later: throttling that
	// outlasted the retries, a 5xx answer, a network error or a timeout.
	ErrTransient = errors.New("transient registry failure")
	// ErrInvalidConfig means the access settings or the image name are wrong
	// and retrying without a change will not help.
	ErrInvalidConfig = errors.New("invalid registry configuration")
	// ErrUnsafeCloudSettings means a cloud provider was combined with a
	// setting that could send its token elsewhere (insecure, a custom CA, a
	// proxy); it comes wrapped with ErrInvalidConfig.
	ErrUnsafeCloudSettings = errors.New("unsafe settings for a cloud provider")
	// ErrTagListTooLarge means a repository's tag list went past the
	// Scanner's bound on tags, bytes or pages.
	ErrTagListTooLarge = errors.New("the tag list is larger than allowed")
	// ErrManifestTooLarge means a manifest, an image index or a referrers
	// index was larger than MaxManifestBytes; it is not parsed.
	ErrManifestTooLarge = errors.New("the manifest is larger than allowed")
)

// maxErrorText is the longest text of a registry's answer kept in an
// error, which ends up in status.
const maxErrorText = 256

// shortError is an error of the registry's answer, told in one line of at
// most maxErrorText bytes.
type shortError struct{ err error }

func (e shortError) Error() string {
	text := strings.Join(strings.Fields(e.err.Error()), " ")
	if len(text) <= maxErrorText {
		return text
	}
	cut := maxErrorText
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + "…"
}

func (e shortError) Unwrap() error { return e.err }

// classify wraps err with the sentinel that says what a caller can do about
// it, or returns it unchanged when none applies.
func classify(err error) error {
	var terr *transport.Error
	switch {
	case errors.Is(err, ErrInvalidConfig), errors.Is(err, ErrTagListTooLarge), errors.Is(err, ErrManifestTooLarge):
		return err
	case errors.Is(err, outbound.ErrDenied):
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	case errors.As(err, &terr):
		err = shortError{err}
		switch {
		case terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden:
			return fmt.Errorf("%w: %w", ErrUnauthorized, err)
		case terr.StatusCode == http.StatusNotFound:
			return fmt.Errorf("%w: %w", ErrNotFound, err)
		case terr.StatusCode == http.StatusTooManyRequests || terr.StatusCode == http.StatusRequestTimeout || terr.StatusCode >= 500:
			return fmt.Errorf("%w: %w", ErrTransient, err)
		}
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", ErrTransient, err)
	}
	var nerr net.Error
	if errors.As(err, &nerr) {
		return fmt.Errorf("%w: %w", ErrTransient, err)
	}
	return err
}
