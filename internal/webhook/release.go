package webhook

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Release is a release a Git forge notification reports: GitHub's
// `release` event, or Gitea's and Forgejo's of the same shape.
type Release struct {
	// Repository is the repository's owner/name.
	Repository string
	// Action is what happened: published, created, edited, ...
	Action string
}

// releaseEvent holds the fields of a release event uprev reads.
type releaseEvent struct {
	Action     string `json:"action"`
	Repository *struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
}

// ParseRelease reads a release event (X-GitHub-Event, X-Gitea-Event or
// X-Forgejo-Event: release). Other events yield nil and no error; a
// release event that names no repository is an error wrapping
// ErrMalformed.
func ParseRelease(h http.Header, body []byte) (*Release, error) {
	isRelease := false
	for _, header := range []string{"X-GitHub-Event", "X-Gitea-Event", "X-Forgejo-Event"} {
		if h.Get(header) == "release" {
			isRelease = true
		}
	}
	if !isRelease {
		return nil, nil
	}
	var ev releaseEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if ev.Repository == nil || !strings.Contains(ev.Repository.FullName, "/") {
		return nil, fmt.Errorf("%w: release event without a repository full_name", ErrMalformed)
	}
	return &Release{Repository: ev.Repository.FullName, Action: ev.Action}, nil
}
