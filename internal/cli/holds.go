package cli

import (
	"context"
	"fmt"
	"io"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/guard"
)

// heldAutomation is an automation of either kind with the holds it
// reports: an UpdateAutomation's status.holds, or the annotation
// uprevv1.HoldsAnnotation the manager publishes on a Flux
// ImageUpdateAutomation, whose status has no field for them. `uprev get
// holds` and `uprev release-hold` read both kinds through it.
type heldAutomation struct {
	// Object is the automation.
	Object client.Object
	// Kind is its kind: UpdateAutomation or ImageUpdateAutomation.
	Kind string
	// Resource names its kind as kubectl does: updateautomation.uprev.dev.
	Resource string
	// Holds are the holds it reports.
	Holds []uprevv1.Hold
	// Omitted counts the holds in force it does not list (an
	// ImageUpdateAutomation's annotation lists at most
	// uprevv1.MaxPublishedHolds).
	Omitted int
}

// heldUpdateAutomation returns the holds of an UpdateAutomation.
func heldUpdateAutomation(a *uprevv1.UpdateAutomation) heldAutomation {
	return heldAutomation{
		Object: a, Kind: uprevv1.UpdateAutomationKind, Resource: "updateautomation." + uprevv1.GroupVersion.Group,
		Holds: a.Status.Holds,
	}
}

// heldFluxAutomation returns the holds of a Flux ImageUpdateAutomation, as
// its annotation publishes them.
func heldFluxAutomation(a *iacv1.ImageUpdateAutomation) (heldAutomation, error) {
	p, err := uprevv1.DecodeHolds(a.Annotations[uprevv1.HoldsAnnotation])
	if err != nil {
		return heldAutomation{}, fmt.Errorf("%s %s/%s: %w", iacv1.ImageUpdateAutomationKind, a.Namespace, a.Name, err)
	}
	return heldAutomation{
		Object: a, Kind: iacv1.ImageUpdateAutomationKind, Resource: "imageupdateautomation." + iacv1.GroupVersion.Group,
		Holds: p.Holds, Omitted: p.Omitted,
	}, nil
}

// readHeldAutomations returns the automations q asks for: each name an
// UpdateAutomation, else the ImageUpdateAutomation of that name; without
// names, the UpdateAutomations, then the ImageUpdateAutomations when
// their kind is installed.
func readHeldAutomations(ctx context.Context, c client.Reader, q Query) ([]heldAutomation, error) {
	var held []heldAutomation
	for _, name := range q.Names {
		h, err := lookupHeldAutomation(ctx, c, client.ObjectKey{Namespace: q.Namespace, Name: name})
		if err != nil {
			return nil, err
		}
		held = append(held, h)
	}
	if len(q.Names) > 0 {
		return held, nil
	}
	autos, err := readAutomations(ctx, c, q)
	if err != nil {
		return nil, err
	}
	for _, a := range autos {
		held = append(held, heldUpdateAutomation(a))
	}
	var list iacv1.ImageUpdateAutomationList
	fluxAutos, err := readObjects[iacv1.ImageUpdateAutomation](ctx, c, iacv1.GroupVersion.WithKind(iacv1.ImageUpdateAutomationKind), &list, &list.Items, q)
	if err != nil && !meta.IsNoMatchError(err) {
		return nil, err
	}
	for _, a := range fluxAutos {
		h, err := heldFluxAutomation(a)
		if err != nil {
			return nil, err
		}
		held = append(held, h)
	}
	return held, nil
}

// heldAutomation reads the automation name in the flags' namespace, with
// a client of the flags' cluster: what reject and release-hold both start
// from.
func (f *clusterFlags) heldAutomation(ctx context.Context, errOut io.Writer, name string) (client.Client, string, heldAutomation, error) {
	ns, err := f.namespace()
	if err != nil {
		return nil, "", heldAutomation{}, err
	}
	c, err := f.client(errOut)
	if err != nil {
		return nil, "", heldAutomation{}, err
	}
	held, err := lookupHeldAutomation(ctx, c, client.ObjectKey{Namespace: ns, Name: name})
	return c, ns, held, err
}

// lookupHeldAutomation reads the UpdateAutomation key, else the
// ImageUpdateAutomation key.
func lookupHeldAutomation(ctx context.Context, c client.Reader, key client.ObjectKey) (heldAutomation, error) {
	auto := &uprevv1.UpdateAutomation{}
	err := c.Get(ctx, key, auto)
	if err == nil {
		auto.SetGroupVersionKind(uprevv1.GroupVersion.WithKind(uprevv1.UpdateAutomationKind))
		auto.SetManagedFields(nil)
		return heldUpdateAutomation(auto), nil
	}
	if !apierrors.IsNotFound(err) {
		return heldAutomation{}, lookupError(err, uprevv1.UpdateAutomationKind, key.Namespace, key.Name)
	}
	flux := &iacv1.ImageUpdateAutomation{}
	if err := c.Get(ctx, key, flux); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return heldAutomation{}, fmt.Errorf("UpdateAutomation %q not found in namespace %q (nor an ImageUpdateAutomation)", key.Name, key.Namespace)
		}
		return heldAutomation{}, lookupError(err, iacv1.ImageUpdateAutomationKind, key.Namespace, key.Name)
	}
	flux.SetGroupVersionKind(iacv1.GroupVersion.WithKind(iacv1.ImageUpdateAutomationKind))
	flux.SetManagedFields(nil)
	return heldFluxAutomation(flux)
}

// guardHold is a hold of an automation's status as internal/guard knows
// it.
func guardHold(h uprevv1.Hold) guard.Hold {
	return guard.Hold{Policy: h.Policy, Version: h.Version, RevertedIn: h.RevertedIn, Reason: h.Reason}
}
