package restart

import (
	"context"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// createAgent creates the namespace fleet, its ImageRepository agent of
// image, scanned hourly, and its ImagePolicy agent, which selects the
// highest version from 1.0.0 on.
func createAgent(t *testing.T, k8s client.Client, image string) (*imagev1.ImageRepository, *imagev1.ImagePolicy) {
	t.Helper()
	ctx := context.Background()
	repo := &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "agent"},
		Spec:       imagev1.ImageRepositorySpec{Image: image, Interval: metav1.Duration{Duration: time.Hour}},
	}
	pol := &imagev1.ImagePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "agent"},
		Spec: imagev1.ImagePolicySpec{
			ImageRepositoryRef: meta.NamespacedObjectReference{Name: "agent"},
			Policy:             imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}},
		},
	}
	for _, obj := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}}, repo, pol} {
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
	return repo, pol
}
