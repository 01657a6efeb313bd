package install

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/controllers"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/testenv/manager"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// TestUpgradeKeepsObjects installs an earlier uprev (testdata/upgrade:
// config/default of commit 9fd6a76), creates an object of every kind
// there, then upgrades to this checkout's config/default with kubectl
// apply, as docs/install.md#upgrading says. Every object is still served
// and can still be changed (a CRD's new validation rules do not lock out
// objects written under the old ones), every CRD stores only the version
// it serves as storage, and this manager picks the objects up: the
// ImageRepository scans and the ImagePolicy selects.
func TestUpgradeKeepsObjects(t *testing.T) {
	g := NewWithT(t)
	c, err := cluster.StartEmpty(cluster.AssetsDir())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = c.Stop() })
	k, kubeconfig := kubectlOn(t, c)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/agent", "1.0.0", "1.2.0")

	k.run("apply", "-f", "test/install/testdata/upgrade/install-9fd6a76.yaml")
	k.run("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
	k.run("create", "namespace", "apps")
	objects, err := os.ReadFile(filepath.Join("testdata", "upgrade", "objects.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	written := filepath.Join(t.TempDir(), "objects.yaml")
	g.Expect(os.WriteFile(written, []byte(strings.ReplaceAll(string(objects), "REGISTRY", reg.Host())), 0o600)).To(Succeed())
	out, _ := k.run("apply", "-f", written)
	g.Expect(strings.Count(out, " created")).To(Equal(7), out)

	// The upgrade.
	out, _ = k.run("apply", "-k", "config/default")
	g.Expect(out).To(ContainSubstring("deployment.apps/uprev configured"))
	k.run("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")

	// Every object is served, and a change of it passes the new schema.
	for _, kind := range []string{"imagerepository/agent", "imagepolicy/agent", "imageupdateautomation/flux-system",
		"updateautomation/fleet", "sync/agent", "releasegate/prod", "releasesource/kubernetes"} {
		out, _ := k.run("label", "-n", "apps", kind, "upgraded=true")
		g.Expect(out).To(ContainSubstring("labeled"), kind)
	}

	scheme, err := controllers.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	cl, err := client.New(c.Config, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	var crds apiextensionsv1.CustomResourceDefinitionList
	g.Expect(cl.List(t.Context(), &crds)).To(Succeed())
	g.Expect(crds.Items).To(HaveLen(8))
	for _, crd := range crds.Items {
		var storage []string
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				storage = append(storage, v.Name)
			}
		}
		g.Expect(crd.Status.StoredVersions).To(Equal(storage), "%s stores only its storage version", crd.Name)
	}

	// This manager reconciles what the earlier install's users wrote.
	storage := t.TempDir()
	manager.Start(t, manager.Build(t), kubeconfig, storage, "--controllers=image")
	g.Eventually(func(g Gomega) {
		var pol imagev1.ImagePolicy
		g.Expect(cl.Get(t.Context(), client.ObjectKey{Namespace: "apps", Name: "agent"}, &pol)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(pol.Status.Conditions, meta.ReadyCondition)).To(BeTrue(), "%v", pol.Status.Conditions)
		g.Expect(pol.Status.LatestRef).NotTo(BeNil())
		g.Expect(pol.Status.LatestRef.Tag).To(Equal("1.2.0"))
	}).WithTimeout(time.Minute).Should(Succeed())
}
