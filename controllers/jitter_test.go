package controllers

import (
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// TestAtLeastMinInterval: an object whose interval is under the floor runs
// again at most once per floor, whatever its run asked for; one at or above
// the floor, or a kind without an interval, keeps what its run asked for.
func TestAtLeastMinInterval(t *testing.T) {
	g := NewWithT(t)
	repo := func(interval time.Duration) client.Object {
		return &imagev1.ImageRepository{Spec: imagev1.ImageRepositorySpec{Interval: metav1.Duration{Duration: interval}}}
	}
	sync := &uprevv1.Sync{Spec: uprevv1.SyncSpec{Interval: metav1.Duration{Duration: time.Minute}}}
	const floor = 10 * time.Second
	for _, tc := range []struct {
		name               string
		obj                client.Object
		after, floor, want time.Duration
	}{
		{"1ms under the floor", repo(time.Millisecond), time.Millisecond, floor, floor},
		{"a retry of an object under the floor", repo(time.Millisecond), time.Second, floor, floor},
		{"no requeue", repo(time.Millisecond), 0, floor, 0},
		{"no floor", repo(time.Millisecond), time.Millisecond, 0, time.Millisecond},
		{"at the floor", repo(floor), time.Second, floor, time.Second},
		{"a Sync's pause", sync, 3 * time.Second, floor, 3 * time.Second},
		{"a gate, no interval", &uprevv1.ReleaseGate{}, time.Second, floor, time.Second},
	} {
		g.Expect(atLeastMinInterval(tc.obj, tc.after, tc.floor)).To(Equal(tc.want), tc.name)
	}
}
