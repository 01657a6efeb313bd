package apply

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// waitHealthy waits with kstatus until every object of the set, except
// the skipped ones, is Current, one of them failed, or timeout passes. On
// failure it returns a *HealthError naming the objects that are not
// healthy.
func waitHealthy(ctx context.Context, rm *ssa.ResourceManager, set []*unstructured.Unstructured, skipped map[object.ObjMetadata]bool, timeout time.Duration) error {
	var objects []*unstructured.Unstructured
	for _, o := range set {
		if !skipped[object.UnstructuredToObjMetadata(o)] {
			objects = append(objects, o)
		}
	}
	jobsWithTTL := ssautils.ExtractJobsWithTTL(objects)
	err := rm.WaitForSetWithContext(ctx, object.UnstructuredSetToObjMetadataSet(objects), ssa.WaitOptions{
		Interval:    pollInterval,
		Timeout:     timeout,
		FailFast:    true,
		JobsWithTTL: jobsWithTTL,
	})
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("waiting for health: %w", context.Cause(ctx))
	}
	unhealthy, serr := unhealthyObjects(ctx, rm.Client(), objects, jobsWithTTL)
	if serr != nil {
		return &HealthError{Err: fmt.Errorf("%w (and listing unhealthy objects: %w)", err, serr)}
	}
	return &HealthError{Unhealthy: unhealthy, Err: err}
}

// unhealthyObjects reads every object and returns those kstatus does not
// find Current: the wait reports its verdict only as text, so the
// per-object detail is read again once it has ended.
func unhealthyObjects(ctx context.Context, c client.Client, objects []*unstructured.Unstructured, jobsWithTTL object.ObjMetadataSet) ([]ObjectStatus, error) {
	statuses := make([]*ObjectStatus, len(objects))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for i, o := range objects {
		g.Go(func() error {
			id := object.UnstructuredToObjMetadata(o)
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(o.GroupVersionKind())
			err := c.Get(gctx, client.ObjectKeyFromObject(o), live)
			switch {
			case apierrors.IsNotFound(err) && jobsWithTTL.Contains(id):
				return nil
			case apierrors.IsNotFound(err):
				statuses[i] = objectStatus(o, status.NotFoundStatus, "")
				return nil
			case err != nil:
				return fmt.Errorf("reading %s: %w", ssautils.FmtUnstructured(o), err)
			}
			res, err := status.Compute(live)
			if err != nil {
				statuses[i] = objectStatus(o, status.UnknownStatus, err.Error())
				return nil
			}
			if res.Status != status.CurrentStatus {
				statuses[i] = objectStatus(o, res.Status, res.Message)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var unhealthy []ObjectStatus
	for _, s := range statuses {
		if s != nil {
			unhealthy = append(unhealthy, *s)
		}
	}
	return unhealthy, nil
}

// objectStatus describes the health of o.
func objectStatus(o *unstructured.Unstructured, s status.Status, message string) *ObjectStatus {
	return &ObjectStatus{
		ID:      object.UnstructuredToObjMetadata(o).String(),
		Subject: ssautils.FmtUnstructured(o),
		Status:  s.String(),
		Message: message,
	}
}
