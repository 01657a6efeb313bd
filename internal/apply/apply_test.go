package apply

import (
	"context"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// crdYAML defines a namespaced kind Widget in the group %s, with a Ready
// condition in its status.
const crdYAML = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.%[1]s
spec:
  group: %[1]s
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
`

const widgetYAML = `apiVersion: %s/v1
kind: Widget
metadata:
  name: %s
  namespace: %s
spec:
  size: %d
`

func TestApplyCRDAndCustomResourcesInOneGo(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := uniqueName("widgets")
	group := uniqueName("w") + ".uprev.test"
	objects := manifests(t, map[string]string{
		"crd.yaml":     fmt.Sprintf(crdYAML, group),
		"ns.yaml":      fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", ns),
		"widgets.yaml": fmt.Sprintf(widgetYAML, group, "small", ns, 1) + "---\n" + fmt.Sprintf(widgetYAML, group, "large", ns, 9),
		"cm.yaml":      fmt.Sprintf(configMapYAML, "settings", ns, "a"),
		// A namespaced object without a namespace gets the default one.
		"defaulted.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: defaulted}\n",
	})

	result, err := testApplier.Apply(ctx, objects, nil, Options{Owner: testOwner, DefaultNamespace: ns})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Created()).To(ConsistOf(
		id("", "widgets."+group, "apiextensions.k8s.io", "CustomResourceDefinition"),
		id("", ns, "", "Namespace"),
		id(ns, "small", group, "Widget"),
		id(ns, "large", group, "Widget"),
		id(ns, "settings", "", "ConfigMap"),
		id(ns, "defaulted", "", "ConfigMap"),
	))
	// Apply order: the CRD and the Namespace come first.
	g.Expect(result.Inventory[0]).To(Equal(Entry{ID: id("", "widgets."+group, "apiextensions.k8s.io", "CustomResourceDefinition"), Version: "v1"}))
	g.Expect(result.Inventory[1]).To(Equal(Entry{ID: id("", ns, "", "Namespace"), Version: "v1"}))
	g.Expect(result.Inventory).To(ContainElement(Entry{ID: id(ns, "large", group, "Widget"), Version: "v1"}))
	g.Expect(result.Health).To(Equal(HealthNotChecked))

	large, err := get(group+"/v1", "Widget", ns, "large")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(large.Object["spec"]).To(HaveKeyWithValue("size", int64(9)))
	g.Expect(large.GetManagedFields()[0].Manager).To(Equal(FieldManager))
	version := large.GetResourceVersion()

	// The same set again changes nothing and writes nothing.
	again, err := testApplier.Apply(ctx, objects, result.Inventory, Options{Owner: testOwner, DefaultNamespace: ns, Prune: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Unchanged()).To(HaveLen(6))
	g.Expect(again.Changed()).To(BeFalse())
	g.Expect(again.Inventory).To(Equal(result.Inventory))
	large, err = get(group+"/v1", "Widget", ns, "large")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(large.GetResourceVersion()).To(Equal(version))
}

func TestApplyRejectedSetAppliesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	group := uniqueName("w") + ".uprev.test"
	objects := manifests(t, map[string]string{
		"good.yaml": fmt.Sprintf(configMapYAML, "good", ns, "a"),
		"crd.yaml":  fmt.Sprintf(crdYAML, group),
		// spec.replicas must be an integer.
		"deploy.yaml": fmt.Sprintf(deploymentYAML, "broken", ns) + "---\n" + `apiVersion: apps/v1
kind: Deployment
metadata: {name: typo, namespace: ` + ns + `}
spec:
  replicas: "three"
  selector: {matchLabels: {app: typo}}
  template:
    metadata: {labels: {app: typo}}
    spec: {containers: [{name: app, image: nginx}]}
`,
		// A port out of range is refused by validation.
		"svc.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: svc, namespace: " + ns + "}\nspec: {ports: [{port: 99999}]}\n",
		// A kind nobody defines.
		"unknown.yaml": "apiVersion: nowhere.uprev.test/v1\nkind: Gadget\nmetadata: {name: g, namespace: " + ns + "}\n",
	})
	// Make the first Deployment invalid too: a field the schema lacks.
	for _, o := range objects {
		if o.GetName() == "broken" {
			o.Object["spec"].(map[string]any)["replicass"] = int64(2)
		}
	}

	result, err := testApplier.Apply(ctx, objects, nil, Options{Owner: testOwner})
	var validationErr *ValidationError
	g.Expect(errors.As(err, &validationErr)).To(BeTrue(), "got %v", err)
	failed := map[string]string{}
	for _, f := range validationErr.Failures {
		failed[f.ID] = f.Message
	}
	g.Expect(failed).To(HaveLen(4))
	g.Expect(failed).To(HaveKeyWithValue(id(ns, "broken", "apps", "Deployment"), ContainSubstring("replicass")))
	g.Expect(failed).To(HaveKeyWithValue(id(ns, "typo", "apps", "Deployment"), ContainSubstring("replicas")))
	g.Expect(failed).To(HaveKeyWithValue(id(ns, "svc", "", "Service"), ContainSubstring("99999")))
	g.Expect(failed).To(HaveKeyWithValue(id(ns, "g", "nowhere.uprev.test", "Gadget"), ContainSubstring("no matches for kind")))
	g.Expect(err.Error()).To(ContainSubstring("Deployment/" + ns + "/typo"))
	g.Expect(result.Inventory).To(BeNil())
	g.Expect(result.Changed()).To(BeFalse())

	_, err = get("v1", "ConfigMap", ns, "good")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the valid ConfigMap must not be applied: %v", err)
	_, err = get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets."+group)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the CRD must not be applied: %v", err)
}

func TestApplyRejectedCustomResourceIsReported(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	group := uniqueName("w") + ".uprev.test"
	bad := fmt.Sprintf(widgetYAML, group, "bad", ns, 1)
	objects := manifests(t, map[string]string{
		"crd.yaml":    fmt.Sprintf(crdYAML, group),
		"widget.yaml": bad,
		"cm.yaml":     fmt.Sprintf(configMapYAML, "settings", ns, "a"),
	})
	for _, o := range objects {
		if o.GetName() == "bad" {
			o.Object["spec"] = map[string]any{"size": "huge"}
		}
	}

	// The CR can only be validated once its CRD is established: the CRD is
	// applied, the CR is reported, and no other object is applied.
	result, err := testApplier.Apply(ctx, objects, nil, Options{Owner: testOwner})
	var validationErr *ValidationError
	g.Expect(errors.As(err, &validationErr)).To(BeTrue(), "got %v", err)
	g.Expect(validationErr.Failures).To(HaveLen(1))
	g.Expect(validationErr.Failures[0].ID).To(Equal(id(ns, "bad", group, "Widget")))
	g.Expect(validationErr.Failures[0].Message).To(ContainSubstring("spec.size"))
	g.Expect(result.Created()).To(ConsistOf(id("", "widgets."+group, "apiextensions.k8s.io", "CustomResourceDefinition")))
	g.Expect(result.Inventory).To(HaveLen(3), "a half-applied set is kept in the inventory")
	_, err = get("v1", "ConfigMap", ns, "settings")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
}

func TestApplyImpersonatesServiceAccount(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	objects := manifests(t, map[string]string{"cm.yaml": fmt.Sprintf(configMapYAML, "settings", ns, "a")})
	opts := Options{Owner: testOwner, ServiceAccount: "deployer", ServiceAccountNamespace: ns}

	_, err := testApplier.Apply(ctx, objects, nil, opts)
	var validationErr *ValidationError
	g.Expect(errors.As(err, &validationErr)).To(BeTrue(), "got %v", err)
	g.Expect(validationErr.Failures[0].Message).To(ContainSubstring(`"system:serviceaccount:` + ns + `:deployer" cannot`))

	g.Expect(k8sClient.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}},
	})).To(Succeed())
	g.Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "deployer"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "deployer", Namespace: ns}},
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		result, err := testApplier.Apply(ctx, objects, nil, opts)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(result.Created()).To(ConsistOf(id(ns, "settings", "", "ConfigMap")))
	}).Should(Succeed())
	cm, err := get("v1", "ConfigMap", ns, "settings")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cm.GetManagedFields()[0].Manager).To(Equal(FieldManager))
}

func TestApplyUnreachableCluster(t *testing.T) {
	g := NewWithT(t)
	// Nothing listens on port 1.
	applier, err := NewApplier(&rest.Config{Host: "https://127.0.0.1:1", BearerToken: "s3cr3t-token"}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	objects := manifests(t, map[string]string{"cm.yaml": fmt.Sprintf(configMapYAML, "settings", "default", "a")})

	_, err = applier.Apply(context.Background(), objects, nil, Options{Owner: testOwner})
	var unreachable *UnreachableError
	g.Expect(errors.As(err, &unreachable)).To(BeTrue(), "got %v", err)
	g.Expect(unreachable.Host).To(Equal("https://127.0.0.1:1"))
	var validationErr *ValidationError
	g.Expect(errors.As(err, &validationErr)).To(BeFalse())
	g.Expect(err.Error()).NotTo(ContainSubstring("s3cr3t-token"))
}
