package apply

import (
	"reflect"
	"testing"
)

// TestRunningOf pins the one answer to "which versions does a target run"
// that the promotion gate and the fleet view both read.
func TestRunningOf(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tagged := Component{Image: "ghcr.io/acme/app", Tag: "1.2.0"}
	taggedPinned := Component{Image: "ghcr.io/acme/app", Tag: "1.2.0", Digest: digest}
	digestOnly := Component{Image: "ghcr.io/acme/app", Digest: digest}
	tests := []struct {
		name       string
		components []Component
		canonical  string
		want       []Component
	}{
		{name: "nothing applied", components: nil, canonical: "ghcr.io/acme/app", want: nil},
		{name: "tag", components: []Component{tagged}, canonical: "ghcr.io/acme/app", want: []Component{tagged}},
		{name: "tag and digest", components: []Component{taggedPinned}, canonical: "ghcr.io/acme/app", want: []Component{taggedPinned}},
		{name: "digest alone runs the image, with no tag", components: []Component{digestOnly}, canonical: "ghcr.io/acme/app", want: []Component{digestOnly}},
		{name: "other image", components: []Component{{Image: "ghcr.io/acme/other", Tag: "1.2.0"}}, canonical: "ghcr.io/acme/app", want: nil},
		{name: "Docker Hub short name is canonical",
			components: []Component{{Image: "nginx", Tag: "1.27"}},
			canonical:  "index.docker.io/library/nginx",
			want:       []Component{{Image: "nginx", Tag: "1.27"}}},
		{name: "invalid reference runs nothing", components: []Component{{Image: "Not A Ref", Tag: "1"}}, canonical: "Not A Ref", want: nil},
		{name: "order kept",
			components: []Component{digestOnly, {Image: "ghcr.io/acme/sidecar", Tag: "2"}, tagged},
			canonical:  "ghcr.io/acme/app",
			want:       []Component{digestOnly, tagged}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RunningOf(tt.components, tt.canonical); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("RunningOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}
