package controllers

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/apply"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// Digests of two builds of the web image.
const (
	webDigest1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	webDigest2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

// cronJob returns the YAML of a CronJob running image.
func cronJob(ns, name, image string) string {
	return fmt.Sprintf(`apiVersion: batch/v1
kind: CronJob
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - name: job
            image: %[3]s
`, ns, name, image)
}

// publishedSeries returns the labels of every uprev_target_component_info
// series of the Syncs in namespace ns, from the manager's registry.
func publishedSeries(g Gomega, ns string) []map[string]string {
	families, err := crmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	var series []map[string]string
	for _, f := range families {
		if f.GetName() != "uprev_target_component_info" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			g.Expect(m.GetGauge().GetValue()).To(Equal(1.0))
			if labels["namespace"] == ns {
				series = append(series, labels)
			}
		}
	}
	return series
}

// seriesLabels returns the labels of the series of one component.
func seriesLabels(sync, ns, target, image, tag, digest string) map[string]string {
	return map[string]string{"sync": sync, "namespace": ns, "target": target, "image": image, "tag": tag, "digest": digest}
}

func TestSyncReportsAppliedComponents(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{
		"app/web.yaml":    deployment(ns, "web", "ghcr.io/acme/web:1.0.0@"+webDigest1),
		"app/backup.yaml": cronJob(ns, "backup", "busybox:1.36"),
		"app/config.yaml": configMap(ns, "settings", "v1"),
	})
	s := newSync(t, ns, url, "app")
	waitApplied(t, s, srv.Log(t, "fleet", "main")[0].SHA, "local")
	g.Expect(s.Status.Targets[0].Components).To(Equal([]uprevv1.AppliedComponent{
		{Image: "busybox", Tag: "1.36"},
		{Image: "ghcr.io/acme/web", Tag: "1.0.0", Digest: webDigest1},
	}))
	g.Eventually(func(g Gomega) []map[string]string { return publishedSeries(g, ns) }).Should(ConsistOf(
		seriesLabels(s.Name, ns, "local", "busybox", "1.36", ""),
		seriesLabels(s.Name, ns, "local", "ghcr.io/acme/web", "1.0.0", webDigest1),
	))

	bump := srv.CommitFile(t, "fleet", "main", "app/web.yaml", deployment(ns, "web", "ghcr.io/acme/web:1.1.0@"+webDigest2), "Update web to 1.1.0")
	requestReconcile(t, s)
	waitApplied(t, s, bump, "local")
	g.Expect(s.Status.Targets[0].Components).To(ContainElement(
		uprevv1.AppliedComponent{Image: "ghcr.io/acme/web", Tag: "1.1.0", Digest: webDigest2}))
	g.Eventually(func(g Gomega) []map[string]string { return publishedSeries(g, ns) }).Should(ConsistOf(
		seriesLabels(s.Name, ns, "local", "busybox", "1.36", ""),
		seriesLabels(s.Name, ns, "local", "ghcr.io/acme/web", "1.1.0", webDigest2),
	), "the series of the version no longer applied is gone")

	deleteAndWaitGone(t, s)
	g.Eventually(func(g Gomega) []map[string]string { return publishedSeries(g, ns) }).Should(BeEmpty(),
		"a deleted Sync's series are deleted")
}

// manifest parses the YAML of one object.
func manifest(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	o := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &o.Object); err != nil {
		t.Fatalf("parsing %s: %v", doc, err)
	}
	return o
}

func TestAppliedComponentsLeaveOutSkippedObjects(t *testing.T) {
	g := NewWithT(t)
	objects := []*unstructured.Unstructured{
		manifest(t, deployment("", "web", "ghcr.io/acme/web:1.0.0")),
		manifest(t, deployment("apps", "left-alone", "ghcr.io/acme/legacy:0.9.0")),
	}
	res := apply.Result{ChangeSet: ssa.NewChangeSet()}
	res.ChangeSet.Add(ssa.ChangeSetEntry{Action: ssa.UnchangedAction, ObjMetadata: object.ObjMetadata{
		Namespace: "uprev-system", Name: "web", GroupKind: schema.GroupKind{Group: "apps", Kind: "Deployment"}}})
	res.ChangeSet.Add(ssa.ChangeSetEntry{Action: ssa.SkippedAction, ObjMetadata: object.ObjMetadata{
		Namespace: "apps", Name: "left-alone", GroupKind: schema.GroupKind{Group: "apps", Kind: "Deployment"}}})
	components, omitted := appliedComponents(objects, res, "uprev-system")
	g.Expect(omitted).To(BeZero())
	g.Expect(components).To(Equal([]uprevv1.AppliedComponent{{Image: "ghcr.io/acme/web", Tag: "1.0.0"}}))

	// An object without a namespace, skipped in the default namespace.
	res.ChangeSet.Add(ssa.ChangeSetEntry{Action: ssa.SkippedAction, ObjMetadata: object.ObjMetadata{
		Namespace: "uprev-system", Name: "web", GroupKind: schema.GroupKind{Group: "apps", Kind: "Deployment"}}})
	components, _ = appliedComponents(objects, res, "uprev-system")
	g.Expect(components).To(BeEmpty())
}

func TestTargetComponentMetricFollowsStatus(t *testing.T) {
	g := NewWithT(t)
	m := NewTargetComponentMetric()
	s := &uprevv1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "prod"},
		Spec:       uprevv1.SyncSpec{Targets: []uprevv1.Target{{Name: "eu-1"}, {Name: "us-1"}}},
		Status: uprevv1.SyncStatus{Targets: []uprevv1.TargetStatus{
			{Name: "eu-1", Components: []uprevv1.AppliedComponent{{Image: "ghcr.io/acme/web", Tag: "1.0.0", Digest: webDigest1}}},
			{Name: "us-1", Components: []uprevv1.AppliedComponent{{Image: "ghcr.io/acme/web", Tag: "1.0.0", Digest: webDigest1}}},
			{Name: "gone", Components: []uprevv1.AppliedComponent{{Image: "ghcr.io/acme/web", Tag: "0.9.0"}}},
		}},
	}
	// current is the status of each target the spec names.
	current := func() []*uprevv1.TargetStatus {
		var out []*uprevv1.TargetStatus
		for _, target := range s.Spec.Targets {
			out = append(out, s.Status.Target(target.Name))
		}
		return out
	}
	expect := func(lines ...string) {
		t.Helper()
		text := "# HELP uprev_target_component_info A container image (repository, tag and digest) that a Sync target last applied; always 1.\n" +
			"# TYPE uprev_target_component_info gauge\n" + strings.Join(lines, "")
		g.Expect(testutil.CollectAndCompare(m, strings.NewReader(text))).To(Succeed())
	}
	line := func(target, tag, digest string) string {
		return fmt.Sprintf("uprev_target_component_info{digest=%q,image=\"ghcr.io/acme/web\",namespace=\"ops\",sync=\"prod\",tag=%q,target=%q} 1\n", digest, tag, target)
	}

	m.Publish(s, current())
	expect(line("eu-1", "1.0.0", webDigest1), line("us-1", "1.0.0", webDigest1))

	s.Status.Targets[0].Components[0] = uprevv1.AppliedComponent{Image: "ghcr.io/acme/web", Tag: "1.1.0", Digest: webDigest2}
	m.Publish(s, current())
	expect(line("eu-1", "1.1.0", webDigest2), line("us-1", "1.0.0", webDigest1))

	s.Spec.Targets = s.Spec.Targets[:1]
	m.Publish(s, current())
	expect(line("eu-1", "1.1.0", webDigest2))

	m.Forget(types.NamespacedName{Namespace: "ops", Name: "prod"})
	g.Expect(testutil.CollectAndCount(m)).To(BeZero())

	var unset *TargetComponentMetric
	unset.Publish(s, current())
	unset.Forget(types.NamespacedName{})
}
