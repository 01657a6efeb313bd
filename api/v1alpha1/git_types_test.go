package v1alpha1

import "testing"

func TestGitRefReadsPush(t *testing.T) {
	for _, c := range []struct {
		ref    GitRef
		pushed string
		want   bool
	}{
		{GitRef{Branch: "main"}, "refs/heads/main", true},
		{GitRef{Branch: "main"}, "refs/heads/dev", false},
		{GitRef{Branch: "main"}, "refs/tags/v1.0.0", false},
		{GitRef{Branch: "main"}, "", true},
		{GitRef{Tag: "v1.0.0"}, "refs/tags/v2.0.0", true},
		{GitRef{Tag: "v1.0.0"}, "refs/heads/main", false},
		{GitRef{Branch: "main", Tag: "v1.0.0"}, "refs/heads/main", false},
		{GitRef{Commit: "abc"}, "refs/heads/main", false},
		{GitRef{Commit: "abc"}, "", true},
	} {
		if got := c.ref.ReadsPush(c.pushed); got != c.want {
			t.Errorf("%+v.ReadsPush(%q) = %v, want %v", c.ref, c.pushed, got, c.want)
		}
	}
}
