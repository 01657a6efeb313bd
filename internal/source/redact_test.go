package source

import "testing"

// TestRedactURL: a password, or a user name without one (a token, as in
// https://<token>@github.com), never reaches a message.
func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://bot:hunter2@charts.example.com/stable": "https://bot:xxxxx@charts.example.com/stable",
		"https://ghp_secrettoken@github.com/acme/app":   "https://xxxxx@github.com/acme/app",
		"https://charts.example.com/stable":             "https://charts.example.com/stable",
		"http://[::1]:namedport":                        "the source's URL",
	} {
		if got := RedactURL(raw); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", raw, got, want)
		}
	}
}
