package controllers

import (
	"context"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/internal/fleet"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// webPolicy creates a suspended ImagePolicy on ghcr.io/acme/web whose
// latest ref is tag: suspended, it keeps the ref written here.
func webPolicy(t *testing.T, ns, tag, digest string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	pol := &imagev1.ImagePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: imagev1.ImagePolicySpec{
			ImageRepositoryRef: meta.NamespacedObjectReference{Name: "web"},
			Policy:             imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}},
			Suspend:            true,
		},
	}
	g.Expect(k8s.Create(ctx, pol)).To(Succeed())
	pol.Status.LatestRef = &imagev1.ImageRef{Name: "ghcr.io/acme/web", Tag: tag, Digest: digest}
	g.Expect(k8s.Status().Update(ctx, pol)).To(Succeed())
}

// fleetCells loads the fleet table of namespace ns and returns the cells
// of its one row by column name.
func fleetCells(g Gomega, ns string) map[string]fleet.Cell {
	in, err := fleet.Load(context.Background(), k8s, ns)
	g.Expect(err).NotTo(HaveOccurred())
	table := fleet.Build(in)
	g.Expect(table.Rows).To(HaveLen(1))
	cells := map[string]fleet.Cell{}
	for i, c := range table.Columns {
		cells[c.Name] = table.Rows[0].Cells[i]
	}
	return cells
}

// runs is a cell of a target running web at tag and digest.
func runs(tag, digest string, state fleet.State) fleet.Cell {
	return fleet.Cell{Running: []fleet.Version{{Tag: tag, Digest: digest}}, State: state}
}

// markWebAvailable marks the web Deployment of cluster c healthy once it
// runs image.
func markWebAvailable(t *testing.T, c client.Client, ns, image string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(image))
		g.Expect(cluster.MarkDeploymentAvailable(context.Background(), c, ns, "web")).To(Succeed())
	}).Should(Succeed())
}

func TestFleetViewLoadsFromTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{
		"app/web.yaml": deployment(ns, "web", "ghcr.io/acme/web:1.0.0@"+webDigest1),
	})
	s := newSync(t, ns, url, "app")
	waitApplied(t, s, srv.Log(t, "fleet", "main")[0].SHA, "local")

	webPolicy(t, ns, "1.1.0", webDigest2)

	g.Eventually(func(g Gomega) {
		in, err := fleet.Load(ctx, k8s, ns)
		g.Expect(err).NotTo(HaveOccurred())
		table := fleet.Build(in)
		g.Expect(table.Columns).To(HaveLen(1))
		g.Expect(table.Rows).To(HaveLen(1))
		g.Expect(table.Rows[0].Component).To(Equal("web"))
		g.Expect(table.Rows[0].Cells[0]).To(Equal(fleet.Cell{
			Running: []fleet.Version{{Tag: "1.0.0", Digest: webDigest1}},
			State:   fleet.Behind,
		}))
	}).Should(Succeed())
}

func TestFleetViewFollowsARolloutInWaves(t *testing.T) {
	g := NewWithT(t)
	ns, rc := twoRemoteTargets(t)
	srv := gitserver.Start(t)
	v1, v2 := "ghcr.io/acme/web:1.0.0@"+webDigest1, "ghcr.io/acme/web:1.1.0@"+webDigest2
	url := srv.InitRepo(t, "fleet", "main", map[string]string{"app/web.yaml": deployment(ns, "web", v1)})
	s := newSync(t, ns, url, "app", inWaves(10*time.Minute))
	markWebAvailable(t, rc.euC, ns, v1)
	markWebAvailable(t, rc.usC, ns, v1)
	waitApplied(t, s, srv.Log(t, "fleet", "main")[0].SHA, "eu-1", "us-1")
	webPolicy(t, ns, "1.1.0", webDigest2)

	bump := srv.CommitFile(t, "fleet", "main", "app/web.yaml", deployment(ns, "web", v2), "Update web to 1.1.0")
	requestReconcile(t, s)
	g.Eventually(func(g Gomega) {
		cells := fleetCells(g, ns)
		g.Expect(cells["eu-1"]).To(Equal(runs("1.0.0", webDigest1, fleet.Behind)), "eu-1 is being rolled out to")
		g.Expect(cells["us-1"]).To(Equal(runs("1.0.0", webDigest1, fleet.Waiting)), "us-1 waits for eu-1")
	}).Should(Succeed())

	markWebAvailable(t, rc.euC, ns, v2)
	g.Eventually(func(g Gomega) {
		g.Expect(fleetCells(g, ns)["eu-1"]).To(Equal(runs("1.1.0", webDigest2, fleet.UpToDate)))
	}).Should(Succeed())
	markWebAvailable(t, rc.usC, ns, v2)
	waitApplied(t, s, bump, "eu-1", "us-1")
	g.Eventually(func(g Gomega) {
		g.Expect(fleetCells(g, ns)["us-1"]).To(Equal(runs("1.1.0", webDigest2, fleet.UpToDate)))
	}).Should(Succeed())
}
