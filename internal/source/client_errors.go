package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// requestError describes a request that got no answer, naming the timeout
// when it passed. A refused redirect keeps its own sentinel.
func (s *session) requestError(ctx context.Context, rawURL string, err error) error {
	switch {
	case errors.Is(err, ErrInvalidResponse):
		return fmt.Errorf("GET %s: %w", RedactURL(rawURL), unwrapURLError(err))
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%w: GET %s: no answer from %s %w", ErrUnreachable, RedactURL(rawURL), s.host, ErrTimeout)
	default:
		return fmt.Errorf("%w: GET %s: %w", ErrUnreachable, RedactURL(rawURL), unwrapURLError(err))
	}
}

// unwrapURLError drops net/http's *url.Error wrapper, which repeats the
// method and URL.
func unwrapURLError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// checkRateLimit returns a *RateLimitError when resp says the server
// rate-limits the client: Retry-After on 403 or 429, or GitHub's
// X-RateLimit-Remaining: 0 with X-RateLimit-Reset.
func (s *session) checkRateLimit(resp *http.Response) error {
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
		return nil
	}
	now := s.c.opts.Clock.Now()
	if v := resp.Header.Get("Retry-After"); v != "" {
		if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
			return &RateLimitError{Host: s.host, RetryAfter: time.Duration(secs) * time.Second}
		}
		if when, err := http.ParseTime(v); err == nil {
			return &RateLimitError{Host: s.host, RetryAfter: max(when.Sub(now), time.Second)}
		}
	}
	if resp.Header.Get("X-RateLimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			return &RateLimitError{Host: s.host, RetryAfter: max(time.Unix(reset, 0).Sub(now), time.Second)}
		}
		return &RateLimitError{Host: s.host, RetryAfter: time.Minute}
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return &RateLimitError{Host: s.host, RetryAfter: time.Minute}
	}
	return nil
}

// readBounded reads resp's body, refusing one past MaxBytes (by its
// Content-Length before reading, or while reading).
func (c *Client) readBounded(resp *http.Response) ([]byte, error) {
	limit := c.opts.MaxBytes
	if resp.ContentLength > limit {
		return nil, fmt.Errorf("%w: the answer is %d bytes, more than the bound of %d", ErrInvalidResponse, resp.ContentLength, limit)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("%w: the answer is more than the bound of %d bytes", ErrInvalidResponse, limit)
	}
	return body, nil
}

// errorText is the start of an error answer's body, for a message.
func errorText(body io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(body, maxErrorBody))
	text := strings.Join(strings.Fields(string(b)), " ")
	if text == "" {
		return ""
	}
	return ": " + strings.ToValidUTF8(text, "?")
}

// RedactURL returns rawURL with any password, or a user name that stands
// alone (a token), replaced, for messages.
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "the source's URL"
	}
	// A user name without a password is most often a token
	// (https://<token>@github.com/...): it is hidden as a password is.
	if u.User != nil {
		if _, ok := u.User.Password(); !ok && u.User.Username() != "" {
			u.User = url.User("xxxxx")
		}
	}
	return u.Redacted()
}
