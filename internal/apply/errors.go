package apply

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// BuildError is returned when a directory cannot be turned into objects:
// unreadable or invalid YAML, an object without kind or name, a failing
// kustomize build. Nothing is applied when the build fails.
type BuildError struct {
	// Path is the file (or, for a kustomize build, the directory) at fault.
	Path string
	// Err is what went wrong.
	Err error
}

// Error implements error.
func (e *BuildError) Error() string {
	return fmt.Sprintf("building %s: %v", e.Path, e.Err)
}

// Unwrap returns the underlying error.
func (e *BuildError) Unwrap() error { return e.Err }

// ObjectFailure is one object that the API server rejected.
type ObjectFailure struct {
	// ID is the object's inventory id, <namespace>_<name>_<group>_<kind>.
	ID string
	// Subject is the object in the form Kind/namespace/name.
	Subject string
	// Message is the API server's message.
	Message string
}

// ValidationError is returned when the server-side dry-run of a set fails
// for one or more objects. Nothing of the set is applied, except the
// cluster-wide definitions (CRDs, Namespaces, classes) when the failing
// objects could only be validated after those were in place.
type ValidationError struct {
	// Failures lists every object that failed validation.
	Failures []ObjectFailure
}

// Error implements error.
func (e *ValidationError) Error() string {
	msgs := make([]string, 0, len(e.Failures))
	for _, f := range e.Failures {
		msgs = append(msgs, fmt.Sprintf("%s: %s", f.Subject, f.Message))
	}
	return fmt.Sprintf("validation failed for %d object(s): %s", len(e.Failures), strings.Join(msgs, "; "))
}

// ObjectStatus is the kstatus health of one object.
type ObjectStatus struct {
	// ID is the object's inventory id, <namespace>_<name>_<group>_<kind>.
	ID string
	// Subject is the object in the form Kind/namespace/name.
	Subject string
	// Status is the kstatus status: InProgress, Failed, Terminating,
	// NotFound or Unknown.
	Status string
	// Message is kstatus's explanation, when it gives one.
	Message string
}

// HealthError is returned when applied objects did not become healthy
// within the timeout, or failed. The set was applied (and pruned).
type HealthError struct {
	// Unhealthy lists the objects that were not healthy when the wait ended.
	Unhealthy []ObjectStatus
	// Err is the wait's own error.
	Err error
}

// Error implements error.
func (e *HealthError) Error() string {
	if len(e.Unhealthy) == 0 {
		return fmt.Sprintf("health check failed: %v", e.Err)
	}
	msgs := make([]string, 0, len(e.Unhealthy))
	for _, s := range e.Unhealthy {
		m := fmt.Sprintf("%s is %s", s.Subject, s.Status)
		if s.Message != "" {
			m += ": " + s.Message
		}
		msgs = append(msgs, m)
	}
	return fmt.Sprintf("health check failed for %d object(s): %s", len(e.Unhealthy), strings.Join(msgs, "; "))
}

// Unwrap returns the wait's own error.
func (e *HealthError) Unwrap() error { return e.Err }

// UnreachableError is returned when the target cluster could not be
// reached or did not answer (connection refused, DNS, TLS handshake, 503 or
// 504). Unlike build, validation and health errors it is transient: the
// caller retries with backoff instead of reporting a configuration error.
type UnreachableError struct {
	// Host is the API server address, without credentials.
	Host string
	// Err is the underlying error.
	Err error
}

// Error implements error.
func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cluster %s unreachable: %v", e.Host, e.Err)
}

// Unwrap returns the underlying error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// isUnreachable tells whether err comes from the transport or from an API
// server that is unavailable, rather than from the API rejecting a request.
func isUnreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
	}
	var urlErr *url.Error
	var netErr net.Error
	return errors.As(err, &urlErr) || errors.As(err, &netErr) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// redactedHost returns the config host without any user information.
func redactedHost(host string) string {
	u, err := url.Parse(host)
	if err != nil || u.Host == "" {
		return host
	}
	u.User = nil
	return u.String()
}
