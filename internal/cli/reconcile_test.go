package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// get reads obj again from the test cluster.
func get(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
}

// TestReconcile shows that `uprev reconcile` sets the annotation the
// controllers honour to the time of the request, on automations and
// Syncs, and refuses suspended objects.
func TestReconcile(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	auto := newAutomation(ns, "fleet")
	auto.Annotations = map[string]string{"team": "platform"}
	createWithStatus(t, auto)
	prod := newSync(ns, "prod", "local")
	createWithStatus(t, prod)
	eu := newSync(ns, "eu", "eu-1")
	createWithStatus(t, eu)
	paused := newSync(ns, "paused", "local")
	paused.Spec.Suspend = true
	createWithStatus(t, paused)
	requested := now.Format(time.RFC3339Nano)

	r := uprev(t, "reconcile", "automation", "fleet", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{stdout: "updateautomation.uprev.dev/fleet reconcile requested\n"}))
	get(t, auto)
	g.Expect(auto.Annotations).To(Equal(map[string]string{"team": "platform", meta.ReconcileRequestAnnotation: requested}))
	token, ok := meta.ReconcileAnnotationValue(auto.Annotations)
	g.Expect(ok).To(BeTrue())
	g.Expect(token).To(Equal(requested))

	r = uprev(t, "reconcile", "syncs", "prod", "eu", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{stdout: "sync.uprev.dev/prod reconcile requested\nsync.uprev.dev/eu reconcile requested\n"}))
	for _, s := range []*uprevv1.Sync{prod, eu} {
		get(t, s)
		g.Expect(s.Annotations).To(HaveKeyWithValue(meta.ReconcileRequestAnnotation, requested))
	}

	r = uprev(t, "reconcile", "sync", "paused", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{code: 1, stderr: "uprev reconcile sync: sync.uprev.dev/paused is suspended: resume it with 'uprev resume sync paused'\n"}))
	get(t, paused)
	g.Expect(paused.Annotations).NotTo(HaveKey(meta.ReconcileRequestAnnotation))

	r = uprev(t, "reconcile", "ua", "nope", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{code: 1, stderr: `uprev reconcile automation: UpdateAutomation "nope" not found in namespace "` + ns + "\"\n"}))
}

// TestSuspendResume shows that `uprev suspend` and `uprev resume` set and
// clear spec.suspend, and that resume asks for a reconcile at once.
func TestSuspendResume(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	auto := newAutomation(ns, "fleet")
	createWithStatus(t, auto)
	prod := newSync(ns, "prod", "local")
	createWithStatus(t, prod)

	for _, tc := range []struct {
		args      []string
		out       string
		suspended bool
	}{
		{[]string{"suspend", "automation", "fleet"}, "updateautomation.uprev.dev/fleet suspended\n", true},
		{[]string{"suspend", "automation", "fleet"}, "updateautomation.uprev.dev/fleet already suspended\n", true},
		{[]string{"resume", "automation", "fleet"}, "updateautomation.uprev.dev/fleet resumed\n", false},
		{[]string{"resume", "automation", "fleet"}, "updateautomation.uprev.dev/fleet not suspended\n", false},
	} {
		r := uprev(t, append(tc.args, "-n", ns, kubeconfigFlag)...)
		g.Expect(r).To(Equal(result{stdout: tc.out}), strings.Join(tc.args, " "))
		get(t, auto)
		g.Expect(auto.Spec.Suspend).To(Equal(tc.suspended), strings.Join(tc.args, " "))
	}
	g.Expect(auto.Annotations).To(HaveKeyWithValue(meta.ReconcileRequestAnnotation, now.Format(time.RFC3339Nano)))

	r := uprev(t, "suspend", "sync", "prod", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{stdout: "sync.uprev.dev/prod suspended\n"}))
	get(t, prod)
	g.Expect(prod.Spec.Suspend).To(BeTrue())
	g.Expect(prod.Generation).To(BeEquivalentTo(2), "a change of spec, which the controller's generation predicate passes")
	g.Expect(prod.Annotations).NotTo(HaveKey(meta.ReconcileRequestAnnotation))

	r = uprev(t, "resume", "sync", "prod", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{stdout: "sync.uprev.dev/prod resumed\n"}))
	get(t, prod)
	g.Expect(prod.Spec.Suspend).To(BeFalse())
	g.Expect(prod.Annotations).To(HaveKeyWithValue(meta.ReconcileRequestAnnotation, now.Format(time.RFC3339Nano)))

	r = uprev(t, "suspend", "sync", "nope", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{code: 1, stderr: `uprev suspend sync: Sync "nope" not found in namespace "` + ns + "\"\n"}))
}

// TestReconcileImageKinds shows reconcile, suspend and resume on
// ImageRepositories, ImagePolicies and Flux's ImageUpdateAutomations, as
// on uprev's own kinds.
func TestReconcileImageKinds(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo := &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec:       imagev1.ImageRepositorySpec{Image: "ghcr.io/acme/agent", Interval: metav1.Duration{Duration: time.Hour}},
	}
	createWithStatus(t, repo)
	pol := newPolicy(ns, "agent", meta.NamespacedObjectReference{Name: "agent"})
	createWithStatus(t, pol)
	iua := &iacv1.ImageUpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flux-system"},
		Spec: iacv1.ImageUpdateAutomationSpec{
			SourceRef: iacv1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "flux-system"},
			Interval:  metav1.Duration{Duration: time.Hour},
		},
	}
	createWithStatus(t, iua)

	expectRequested(t, ns, []reconcileCase{
		{[]string{"reconcile", "repository", "agent"}, "imagerepository.image.toolkit.fluxcd.io/agent reconcile requested\n", repo},
		{[]string{"reconcile", "policy", "agent"}, "imagepolicy.image.toolkit.fluxcd.io/agent reconcile requested\n", pol},
		{[]string{"reconcile", "imageupdateautomation", "flux-system"}, "imageupdateautomation.image.toolkit.fluxcd.io/flux-system reconcile requested\n", iua},
	})

	r := uprev(t, "suspend", "imagerepositories", "agent", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{stdout: "imagerepository.image.toolkit.fluxcd.io/agent suspended\n"}))
	get(t, repo)
	g.Expect(repo.Spec.Suspend).To(BeTrue())
	r = uprev(t, "suspend", "policy", "agent", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{stdout: "imagepolicy.image.toolkit.fluxcd.io/agent suspended\n"}))
	get(t, pol)
	g.Expect(pol.Spec.Suspend).To(BeTrue())
	r = uprev(t, "suspend", "iua", "flux-system", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{stdout: "imageupdateautomation.image.toolkit.fluxcd.io/flux-system suspended\n"}))
	get(t, iua)
	g.Expect(iua.Spec.Suspend).To(BeTrue())

	r = uprev(t, "reconcile", "policy", "agent", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{code: 1, stderr: "uprev reconcile policy: imagepolicy.image.toolkit.fluxcd.io/agent is suspended: resume it with 'uprev resume policy agent'\n"}))

	r = uprev(t, "resume", "imageupdateautomation", "flux-system", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{stdout: "imageupdateautomation.image.toolkit.fluxcd.io/flux-system resumed\n"}))
	get(t, iua)
	g.Expect(iua.Spec.Suspend).To(BeFalse())
	r = uprev(t, "resume", "repository", "agent", "policy", "-n", ns, kubeconfigFlag)
	g.Expect(r.stderr).To(Equal(`uprev resume repository: ImageRepository "policy" not found in namespace "` + ns + "\"\n"))
}

// reconcileCase is one `uprev reconcile` command line, what it prints, and
// the object it asks to reconcile.
type reconcileCase struct {
	args []string
	out  string
	obj  client.Object
}

// expectRequested runs each case in ns and checks its output and that
// its object carries the request annotation at the commands' time.
func expectRequested(t *testing.T, ns string, cases []reconcileCase) {
	t.Helper()
	g := NewWithT(t)
	for _, tc := range cases {
		r := uprev(t, append(tc.args, "-n", ns, kubeconfigFlag)...)
		g.Expect(r).To(Equal(result{stdout: tc.out}), strings.Join(tc.args, " "))
		get(t, tc.obj)
		g.Expect(tc.obj.GetAnnotations()).To(HaveKeyWithValue(meta.ReconcileRequestAnnotation, now.Format(time.RFC3339Nano)), strings.Join(tc.args, " "))
	}
}
