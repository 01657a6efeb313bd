package guard_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/guard"
)

func TestUpdateTrailers(t *testing.T) {
	g := NewWithT(t)
	updates := []guard.Update{
		{Policy: "uprev-system/agent", Old: "1.4.1", New: "1.4.2"},
		{Policy: "apps/chart", Old: "3.7.0", New: "3.7.1@sha256:abc"},
		{Policy: "apps/new", New: "1.0.0"},
	}
	g.Expect(guard.FormatUpdateTrailer(updates[0])).To(Equal("Uprev-Update: uprev-system/agent 1.4.1 --> 1.4.2"))
	g.Expect(guard.FormatUpdateTrailer(updates[2])).To(Equal("Uprev-Update: apps/new --> 1.0.0"))

	msg := guard.AppendUpdateTrailers("Update images\n\nagent: 1.4.1 --> 1.4.2", updates)
	g.Expect(msg).To(Equal("Update images\n\nagent: 1.4.1 --> 1.4.2\n\n" +
		"Uprev-Update: uprev-system/agent 1.4.1 --> 1.4.2\nUprev-Update: apps/chart 3.7.0 --> 3.7.1@sha256:abc\nUprev-Update: apps/new --> 1.0.0\n"))
	g.Expect(guard.ParseUpdateTrailers(msg)).To(Equal(updates))
	g.Expect(guard.AppendUpdateTrailers("Update images\n", nil)).To(Equal("Update images\n\n"), "one newline ends the message")
	g.Expect(guard.ParseUpdateTrailers("Update images\n\nagent: 1.4.1 --> 1.4.2\nX-Uprev-Update: a/b 1 --> 2\n")).To(BeEmpty())
}

func FuzzParseUpdateTrailers(f *testing.F) {
	f.Add("uprev-system/agent", "1.4.1", "1.4.2")
	f.Add("a/b", "", "2")
	f.Fuzz(func(t *testing.T, policy, old, new string) {
		u := guard.Update{Policy: policy, Old: old, New: new}
		parsed := guard.ParseUpdateTrailers("subject\n\n" + guard.FormatUpdateTrailer(u) + "\n")
		if !validField(policy) || !validField(new) || (old != "" && !validField(old)) || old == "-->" {
			return
		}
		if len(parsed) != 1 || parsed[0] != u {
			t.Fatalf("round trip of %#v gave %#v", u, parsed)
		}
	})
}

// validField reports whether s can be a trailer field: not empty, no white
// space.
func validField(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f' {
			return false
		}
	}
	return true
}
