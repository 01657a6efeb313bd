package install

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestNoWildcardRules checks that no Role or ClusterRole that uprev installs,
// whole, in pull mode or with the webhook receivers, grants every verb or
// every resource, and that only uprev-metrics-reader grants a non-resource
// URL: GET /metrics.
func TestNoWildcardRules(t *testing.T) {
	k := newKubectl(t, "")
	for _, dir := range []string{"config/default", "config/pull", "config/webhook", "config/multitenant"} {
		t.Run(dir, func(t *testing.T) {
			g := NewWithT(t)
			roles := 0
			for _, obj := range k.build(dir) {
				if obj.GetAPIVersion() != rbacv1.SchemeGroupVersion.String() || (obj.GetKind() != "ClusterRole" && obj.GetKind() != "Role") {
					continue
				}
				roles++
				var role rbacv1.ClusterRole // Role has the same rules field.
				g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &role)).To(Succeed())
				for i, rule := range role.Rules {
					g.Expect(rule.Verbs).NotTo(ContainElement(rbacv1.VerbAll),
						"%s %s rule %d grants every verb", obj.GetKind(), obj.GetName(), i)
					g.Expect(rule.Resources).NotTo(ContainElement(rbacv1.ResourceAll),
						"%s %s rule %d grants every resource", obj.GetKind(), obj.GetName(), i)
					if obj.GetName() == "uprev-metrics-reader" {
						g.Expect(rule).To(Equal(rbacv1.PolicyRule{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}),
							"the metrics reader may GET /metrics only")
						continue
					}
					g.Expect(rule.NonResourceURLs).To(BeEmpty(),
						"%s %s rule %d grants non-resource URLs", obj.GetKind(), obj.GetName(), i)
				}
			}
			g.Expect(roles).To(BeNumerically(">=", 3), "roles found in %s", dir)
		})
	}
}

// TestApplyRoleIsSeparate checks that what the apply loop may change in the
// local cluster is its own, aggregated ClusterRole, empty until the user
// grants it something, and that the manager role does not write workloads.
func TestApplyRoleIsSeparate(t *testing.T) {
	g := NewWithT(t)
	k := newKubectl(t, "")
	roles := map[string]rbacv1.ClusterRole{}
	for _, obj := range k.build("config/default") {
		if obj.GetKind() != "ClusterRole" {
			continue
		}
		var role rbacv1.ClusterRole
		g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &role)).To(Succeed())
		roles[role.Name] = role
	}
	g.Expect(roles).To(HaveKey("uprev-manager"))
	g.Expect(roles).To(HaveKey("uprev-sync-apply"))
	g.Expect(roles).To(HaveKey("uprev-sync-impersonate"))

	apply := roles["uprev-sync-apply"]
	g.Expect(apply.Rules).To(BeEmpty())
	g.Expect(apply.AggregationRule).NotTo(BeNil())
	g.Expect(apply.AggregationRule.ClusterRoleSelectors).To(ConsistOf(
		HaveField("MatchLabels", HaveKeyWithValue("rbac.uprev.dev/aggregate-to-sync-apply", "true"))))

	// The objects it reconciles are patched for their finalizers (its own,
	// or Flux's, released), never created or deleted; a Sync's SyncTargets
	// are its records, written by the manager.
	writes := []string{"create", "update", "patch", "delete", "deletecollection"}
	finalized := []string{"syncs", "updateautomations", "imageupdateautomations", "imagerepositories", "imagepolicies"}
	for _, rule := range roles["uprev-manager"].Rules {
		for _, res := range rule.Resources {
			if slices.ContainsFunc(rule.Verbs, func(v string) bool { return slices.Contains(writes, v) }) {
				g.Expect(res).To(Or(HaveSuffix("/status"), Equal("events"), Equal("synctargets"), BeElementOf(finalized)),
					"uprev-manager writes %s (verbs %v); writes outside status and events belong in uprev-sync-apply", res, rule.Verbs)
			}
			if slices.Contains(finalized, res) {
				g.Expect(rule.Verbs).NotTo(ContainElement(BeElementOf("create", "delete")), "%s are never created or deleted by uprev", res)
			}
		}
	}

	// Minting ServiceAccount tokens, as powerful as impersonation, is a
	// role of its own, for object-level workload identity only.
	g.Expect(roles["uprev-workload-identity"].Rules).To(ConsistOf(rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"},
	}))

	impersonate := roles["uprev-sync-impersonate"]
	g.Expect(impersonate.Rules).To(ConsistOf(rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"},
	}))
}

// deploymentArgs returns the arguments of the uprev manager in the install
// that dir builds.
func deploymentArgs(t *testing.T, k *kubectl, dir string) []string {
	t.Helper()
	g := NewWithT(t)
	var args []string
	for _, obj := range k.build(dir) {
		if obj.GetKind() == "Deployment" && obj.GetName() == "uprev" {
			containers, _, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(containers).To(HaveLen(1))
			for _, a := range containers[0].(map[string]any)["args"].([]any) {
				args = append(args, a.(string))
			}
		}
	}
	return args
}

// TestMultitenantLocksDown checks that config/multitenant turns on Flux's
// lockdown flags and grants the manager no cluster-wide apply role.
func TestMultitenantLocksDown(t *testing.T) {
	g := NewWithT(t)
	k := newKubectl(t, "")
	g.Expect(deploymentArgs(t, k, "config/multitenant")).To(ContainElements(
		"--default-service-account=default", "--no-cross-namespace-refs", "--enable-leader-election"))
	g.Expect(deploymentArgs(t, k, "config/multitenant")).NotTo(ContainElement(HavePrefix("--insecure-kubeconfig")))
	for _, obj := range k.build("config/multitenant") {
		g.Expect(obj.GetName()).NotTo(Equal("uprev-sync-apply"), "%s %s", obj.GetKind(), obj.GetName())
	}
}

// TestPullModeRunsSyncOnly checks that config/pull runs the apply loop alone.
func TestPullModeRunsSyncOnly(t *testing.T) {
	g := NewWithT(t)
	k := newKubectl(t, "")
	args := deploymentArgs(t, k, "config/pull")
	g.Expect(args).To(ContainElement("--controllers=sync"))
	g.Expect(args).NotTo(ContainElement(HavePrefix("--controllers=image")))
	g.Expect(args).To(ContainElement("--enable-leader-election"))
}
