package registry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
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
)

// classify wraps err with the sentinel that says what a caller can do about
// it, or returns it unchanged when none applies.
func classify(err error) error {
	var terr *transport.Error
	switch {
	case errors.As(err, &terr):
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
