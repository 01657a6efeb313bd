package cli

import (
	"strings"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// objectKind is a kind that `uprev reconcile`, `suspend` and `resume` act
// on: one subcommand of each.
type objectKind struct {
	// name is the subcommand, singular: "sync".
	name    string
	aliases []string
	// kind is the Kubernetes kind, for messages.
	kind string
	// resource names its objects in output, as kubectl does:
	// "sync.uprev.dev".
	resource  string
	newObject func() client.Object
	// suspend points at the object's spec.suspend; nil for a kind that
	// cannot be suspended (ReleaseGate), which only reconcile acts on.
	suspend func(client.Object) *bool
	// status returns the reconcile request the controller handled last
	// and the object's conditions.
	status func(client.Object) (lastHandled string, conditions []metav1.Condition)
}

// objectKinds are the kinds that reconcile, suspend and resume act on.
func objectKinds() []objectKind {
	return []objectKind{
		{
			name:      "automation",
			aliases:   []string{"automations", "updateautomation", "updateautomations", "ua"},
			kind:      uprevv1.UpdateAutomationKind,
			resource:  "updateautomation." + uprevv1.GroupVersion.Group,
			newObject: func() client.Object { return &uprevv1.UpdateAutomation{} },
			suspend:   func(obj client.Object) *bool { return &obj.(*uprevv1.UpdateAutomation).Spec.Suspend },
			status: func(obj client.Object) (string, []metav1.Condition) {
				a := obj.(*uprevv1.UpdateAutomation)
				return a.Status.LastHandledReconcileAt, a.Status.Conditions
			},
		},
		{
			name:      "sync",
			aliases:   []string{"syncs"},
			kind:      uprevv1.SyncKind,
			resource:  "sync." + uprevv1.GroupVersion.Group,
			newObject: func() client.Object { return &uprevv1.Sync{} },
			suspend:   func(obj client.Object) *bool { return &obj.(*uprevv1.Sync).Spec.Suspend },
			status: func(obj client.Object) (string, []metav1.Condition) {
				s := obj.(*uprevv1.Sync)
				return s.Status.LastHandledReconcileAt, s.Status.Conditions
			},
		},
		{
			name:      "repository",
			aliases:   []string{"repositories", "imagerepository", "imagerepositories"},
			kind:      imagev1.ImageRepositoryKind,
			resource:  "imagerepository." + imagev1.GroupVersion.Group,
			newObject: func() client.Object { return &imagev1.ImageRepository{} },
			suspend:   func(obj client.Object) *bool { return &obj.(*imagev1.ImageRepository).Spec.Suspend },
			status: func(obj client.Object) (string, []metav1.Condition) {
				r := obj.(*imagev1.ImageRepository)
				return r.Status.LastHandledReconcileAt, r.Status.Conditions
			},
		},
		{
			name:      "policy",
			aliases:   []string{"policies", "imagepolicy", "imagepolicies"},
			kind:      imagev1.ImagePolicyKind,
			resource:  "imagepolicy." + imagev1.GroupVersion.Group,
			newObject: func() client.Object { return &imagev1.ImagePolicy{} },
			suspend:   func(obj client.Object) *bool { return &obj.(*imagev1.ImagePolicy).Spec.Suspend },
			status: func(obj client.Object) (string, []metav1.Condition) {
				p := obj.(*imagev1.ImagePolicy)
				return p.Status.LastHandledReconcileAt, p.Status.Conditions
			},
		},
		{
			name:      "source",
			aliases:   []string{"sources", "releasesource", "releasesources"},
			kind:      uprevv1.ReleaseSourceKind,
			resource:  "releasesource." + uprevv1.GroupVersion.Group,
			newObject: func() client.Object { return &uprevv1.ReleaseSource{} },
			suspend:   func(obj client.Object) *bool { return &obj.(*uprevv1.ReleaseSource).Spec.Suspend },
			status: func(obj client.Object) (string, []metav1.Condition) {
				s := obj.(*uprevv1.ReleaseSource)
				return s.Status.LastHandledReconcileAt, s.Status.Conditions
			},
		},
		{
			name:      "gate",
			aliases:   []string{"gates", "releasegate", "releasegates"},
			kind:      uprevv1.ReleaseGateKind,
			resource:  "releasegate." + uprevv1.GroupVersion.Group,
			newObject: func() client.Object { return &uprevv1.ReleaseGate{} },
			status: func(obj client.Object) (string, []metav1.Condition) {
				g := obj.(*uprevv1.ReleaseGate)
				return g.Status.LastHandledReconcileAt, g.Status.Conditions
			},
		},
		{
			name:      "imageupdateautomation",
			aliases:   []string{"imageupdateautomations", "iua"},
			kind:      iacv1.ImageUpdateAutomationKind,
			resource:  "imageupdateautomation." + iacv1.GroupVersion.Group,
			newObject: func() client.Object { return &iacv1.ImageUpdateAutomation{} },
			suspend:   func(obj client.Object) *bool { return &obj.(*iacv1.ImageUpdateAutomation).Spec.Suspend },
			status: func(obj client.Object) (string, []metav1.Condition) {
				a := obj.(*iacv1.ImageUpdateAutomation)
				return a.Status.LastHandledReconcileAt, a.Status.Conditions
			},
		},
	}
}

// plural is the plural of a kind's name, as the help says it:
// ImagePolicies, Syncs.
func plural(kind string) string {
	if stem, ok := strings.CutSuffix(kind, "y"); ok {
		return stem + "ies"
	}
	return kind + "s"
}

// kindNames lists the names of kinds for messages: "automation, sync,
// repository, policy or imageupdateautomation".
func kindNames(kinds []objectKind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.name
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// verbKinds is how the help of reconcile names the kinds it acts on;
// suspendKinds those suspend and resume act on, all but ReleaseGates.
const (
	verbKinds    = "UpdateAutomations, Syncs, ImageRepositories, ImagePolicies, ReleaseSources, ReleaseGates or Flux ImageUpdateAutomations"
	suspendKinds = "UpdateAutomations, Syncs, ImageRepositories, ImagePolicies, ReleaseSources or Flux ImageUpdateAutomations"
)
