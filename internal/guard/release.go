package guard

import "strings"

// Releases are the holds that an UpdateAutomation's annotation
// uprev.dev/release-holds releases: the automation writes a released
// version again if its policy still selects it.
type Releases struct {
	all     bool
	entries map[string]bool
}

// ParseReleases reads the annotation's value: `*` releases every hold;
// otherwise comma-separated `<namespace>/<policy> <version>` entries each
// release one, white space around and between the two fields not
// mattering. An empty value releases nothing.
func ParseReleases(annotation string) Releases {
	r := Releases{entries: map[string]bool{}}
	for _, entry := range strings.Split(annotation, ",") {
		fields := strings.Fields(entry)
		switch {
		case len(fields) == 1 && fields[0] == "*":
			r.all = true
		case len(fields) == 2:
			r.entries[fields[0]+" "+fields[1]] = true
		}
	}
	return r
}

// Released reports whether h is released.
func (r Releases) Released(h Hold) bool {
	return r.all || r.entries[h.Policy+" "+h.Version]
}

// AddReleases returns annotation, a value of uprev.dev/release-holds, with
// an entry `<namespace>/<policy> <version>` added for each of holds that it
// does not release yet. The entries already there stay: a hold is read
// from Git on every run, so it comes back when its entry goes.
func AddReleases(annotation string, holds ...Hold) string {
	r := ParseReleases(annotation)
	var entries []string
	if a := strings.TrimSpace(annotation); a != "" {
		entries = append(entries, a)
	}
	for _, h := range holds {
		if r.Released(h) {
			continue
		}
		entry := h.Policy + " " + h.Version
		r.entries[entry] = true
		entries = append(entries, entry)
	}
	return strings.Join(entries, ", ")
}

// RemoveReleases returns annotation, a value of uprev.dev/release-holds,
// without the entries that release exactly one of holds (the policy and
// version), so that a version held anew (rejected again) is held; `*`
// and the other entries stay.
func RemoveReleases(annotation string, holds ...Hold) string {
	var kept []string
	for _, entry := range strings.Split(annotation, ",") {
		fields := strings.Fields(entry)
		if len(fields) == 0 {
			continue
		}
		drop := false
		for _, h := range holds {
			drop = drop || (len(fields) == 2 && fields[0] == h.Policy && fields[1] == h.Version)
		}
		if !drop {
			kept = append(kept, strings.Join(fields, " "))
		}
	}
	return strings.Join(kept, ", ")
}
