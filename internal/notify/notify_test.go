package notify

import (
	"testing"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
)

// TestAFullQueueNeverBlocks: with notification-controller unreachable and
// the queue full, recording an event returns at once; the Kubernetes
// recorder still gets every event.
func TestAFullQueueNeverBlocks(t *testing.T) {
	g := NewWithT(t)
	f, err := New("http://127.0.0.1:1/", "uprev", clientgoscheme.Scheme, nil, logr.Discard())
	g.Expect(err).NotTo(HaveOccurred())
	k8s := events.NewFakeRecorder(QueueSize + 10)
	r := f.Wrap(k8s)
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "settings"}}
	for i := range QueueSize + 10 {
		r.Eventf(obj, nil, corev1.EventTypeNormal, "Applied", "Apply", "applied %d", i)
	}
	g.Expect(f.queue).To(HaveLen(QueueSize))
	g.Expect(k8s.Events).To(HaveLen(QueueSize + 10))
	first := <-f.queue
	g.Expect(first.message).To(Equal("applied 0"))
	g.Expect(first.obj).NotTo(BeIdenticalTo(runtime.Object(obj)), "a copy, taken when the event was recorded")
}

func TestAnInvalidAddressIsRefused(t *testing.T) {
	_, err := New("http://[::1", "uprev", clientgoscheme.Scheme, nil, logr.Discard())
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("--events-addr")))
}
