package apply

import "github.com/uprev-dev/uprev/internal/registry"

// RunningOf returns what a target whose applied revision holds components
// runs of the image whose canonical name is canonical, in the order of
// components. It is the one answer to "which versions does a target run",
// for the promotion gate and the fleet view alike.
//
// A component pinned by digest alone (repo@sha256:…) runs the image, so it
// is kept, with an empty Tag: a view shows what runs there. It runs no
// tagged version, so a caller that compares versions by tag (a promotion
// gate) never takes it for one. Components whose image is not a valid
// reference run nothing that can be named, and are left out.
func RunningOf(components []Component, canonical string) []Component {
	var running []Component
	for _, c := range components {
		if name, err := registry.CanonicalName(c.Image); err == nil && name == canonical {
			running = append(running, c)
		}
	}
	return running
}
