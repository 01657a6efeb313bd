package cli

import (
	"context"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/install"
)

// checkManager checks that the manager's Deployment of m is available,
// that it holds its leader election Lease, and that its Services have
// ready endpoints.
func checkManager(ctx context.Context, log *checkLog, c client.Client, m *install.Manifests, clk clock.Clock) {
	for _, obj := range m.Objects {
		if obj.GetKind() != "Deployment" {
			continue
		}
		var dep appsv1.Deployment
		key := client.ObjectKey{Namespace: obj.GetNamespace(), Name: obj.GetName()}
		if err := c.Get(ctx, key, &dep); err != nil {
			log.failure("deployment %s: %v", key, err)
			continue
		}
		checkDeployment(log, &dep)
		checkLease(ctx, log, c, &dep, clk)
	}
	var services corev1.ServiceList
	if err := c.List(ctx, &services, client.InNamespace(m.Namespace), managerLabels); err != nil {
		log.failure("listing the manager's Services: %v", err)
		return
	}
	found := map[string]bool{}
	for _, svc := range services.Items {
		found[svc.Name] = true
		checkEndpoints(ctx, log, c, &svc)
	}
	for _, obj := range m.Objects {
		if obj.GetKind() == "Service" && !found[obj.GetName()] {
			log.failure("service %s/%s: not found", obj.GetNamespace(), obj.GetName())
		}
	}
}

// checkDeployment checks that dep is available at its generation, as
// kstatus computes it.
func checkDeployment(log *checkLog, dep *appsv1.Deployment) {
	key := dep.Namespace + "/" + dep.Name
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(dep)
	if err != nil {
		log.failure("deployment %s: %v", key, err)
		return
	}
	obj := &unstructured.Unstructured{Object: u}
	obj.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	res, err := status.Compute(obj)
	if err != nil {
		log.failure("deployment %s: %v", key, err)
		return
	}
	if res.Status != status.CurrentStatus {
		log.failure("deployment %s: %s (%s)", key, res.Message, res.Status)
		return
	}
	log.success("deployment %s: %s", key, res.Message)
	for _, ctr := range dep.Spec.Template.Spec.Containers {
		if ctr.Name == managerContainer {
			log.action("%s", ctr.Image)
		}
	}
}

// checkLease checks that the leader election Lease of the manager dep runs
// is held and was renewed within its duration. The Lease's name and
// namespace are read from the manager's flags, as `uprev run` reads them.
func checkLease(ctx context.Context, log *checkLog, c client.Client, dep *appsv1.Deployment, clk clock.Clock) {
	var mgr managerOptions
	fs := pflag.NewFlagSet("uprev run", pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	mgr.bindFlags(fs)
	for _, ctr := range dep.Spec.Template.Spec.Containers {
		if ctr.Name != managerContainer {
			continue
		}
		if err := fs.Parse(ctr.Args); err != nil {
			log.failure("reading the flags of deployment %s/%s: %v", dep.Namespace, dep.Name, err)
			return
		}
	}
	if !mgr.leaderOpts.Enable {
		log.success("leader election: off (no --enable-leader-election)")
		return
	}
	key := client.ObjectKey{Namespace: mgr.leaderNS, Name: mgr.leaderElectionID()}
	if key.Namespace == "" {
		key.Namespace = dep.Namespace
	}
	var lease coordinationv1.Lease
	if err := c.Get(ctx, key, &lease); err != nil {
		log.failure("leader election lease %s: %v", key, err)
		return
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	if holder == "" || lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		log.failure("leader election lease %s: no leader holds it", key)
		return
	}
	age := clk.Since(lease.Spec.RenewTime.Time)
	leaseDuration := time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	if age > leaseDuration {
		log.failure("leader election lease %s: held by %s, but last renewed %s ago, longer than its %s", key, holder, duration.HumanDuration(age), leaseDuration)
		return
	}
	log.success("leader election lease %s: held by %s, renewed %s ago", key, holder, duration.HumanDuration(max(age, 0)))
}

// checkEndpoints checks that svc has a ready endpoint, in the
// EndpointSlices the cluster keeps for it.
func checkEndpoints(ctx context.Context, log *checkLog, c client.Client, svc *corev1.Service) {
	key := svc.Namespace + "/" + svc.Name
	var list discoveryv1.EndpointSliceList
	if err := c.List(ctx, &list, client.InNamespace(svc.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
		log.failure("service %s: listing its endpoints: %v", key, err)
		return
	}
	ready := 0
	for _, s := range list.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				ready++
			}
		}
	}
	if ready == 0 {
		log.failure("service %s: no ready endpoint (is the manager's Pod ready?)", key)
		return
	}
	log.success("service %s: %d ready endpoint(s)", key, ready)
}
