package install

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uprev-dev/uprev/controllers"
	"github.com/uprev-dev/uprev/internal/testenv/cluster"
	"github.com/uprev-dev/uprev/internal/testenv/freeport"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// managerRunsAsThePod runs what the quickstart of docs/install.md runs on
// kind or k3d, short of the container runtime and the kubelet, which this
// machine lacks: the binary built as the Dockerfile builds it (static,
// trimmed, the version stamped), started as the image starts it (`uprev
// run`) with the installed Deployment's arguments, as the installed
// ServiceAccount. It must become ready, take the leader lease, and scan an
// ImageRepository of a team's namespace.
func managerRunsAsThePod(t *testing.T, c *cluster.Cluster, cl client.Client) {
	g := NewWithT(t)
	ctx := t.Context()

	bin := filepath.Join(t.TempDir(), "uprev")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-s -w -X github.com/uprev-dev/uprev/internal/version.stamped=quickstart", "-o", bin, ".")
	build.Dir = filepath.Join("..", "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "building uprev as the Dockerfile does: %s", out)

	var dep appsv1.Deployment
	g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "uprev"}, &dep)).To(Succeed())
	health := freeport.Addr(t)
	// The Pod's volume, ports and namespace, which a Pod has and a
	// process here does not.
	args := append([]string{"run"}, podArgs(dep.Spec.Template.Spec.Containers[0].Args, map[string]string{
		"--storage-path": t.TempDir(),
		"--metrics-addr": "0",
		"--health-addr":  health,
	})...)
	args = append(args, "--leader-election-namespace="+namespace)

	mgr := exec.Command(bin, args...)
	mgr.Env = append(os.Environ(), "KUBECONFIG="+serviceAccountKubeConfig(t, c, cl, dep.Spec.Template.Spec.ServiceAccountName))
	logPath := filepath.Join(t.TempDir(), "uprev.log")
	logs, err := os.Create(logPath)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = logs.Close() }() // the process writes through its own handle
	mgr.Stdout, mgr.Stderr = logs, logs
	g.Expect(mgr.Start()).To(Succeed())
	t.Cleanup(func() {
		_ = mgr.Process.Signal(os.Interrupt)
		_ = mgr.Wait()
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("the manager's log:\n%s", log)
		}
	})

	g.Eventually(func(g Gomega) {
		resp, err := http.Get("http://" + health + "/readyz")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.Body.Close()).To(Succeed())
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	}).WithTimeout(time.Minute).Should(Succeed(), "the readiness probe passes")
	g.Eventually(func(g Gomega) {
		var leases coordinationv1.LeaseList
		g.Expect(cl.List(ctx, &leases, client.InNamespace(namespace))).To(Succeed())
		g.Expect(leases.Items).To(ContainElement(HaveField("Spec.HolderIdentity", PointTo(Not(BeEmpty())))))
	}).WithTimeout(time.Minute).Should(Succeed(), "it leads, with the installed Role")

	reg := registry.Start(t)
	reg.PushTags(t, "acme/agent", "1.0.0", "1.1.0")
	team := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "team-"}}
	g.Expect(cl.Create(ctx, team)).To(Succeed())
	repo := &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: team.Name, Name: "agent"},
		Spec:       imagev1.ImageRepositorySpec{Image: reg.Image("acme/agent"), Interval: metav1.Duration{Duration: time.Hour}},
	}
	g.Expect(cl.Create(ctx, repo)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(repo), repo)).To(Succeed())
		g.Expect(repo.Status.LastScanResult).NotTo(BeNil())
		g.Expect(repo.Status.LastScanResult.TagCount).To(Equal(2))
	}).WithTimeout(time.Minute).Should(Succeed(), "it scans, with the installed ClusterRole")
}

// podArgs returns the container's arguments with the values of the flags
// in set replaced.
func podArgs(args []string, set map[string]string) []string {
	out := make([]string, 0, len(args))
	for _, arg := range args {
		name, _, _ := strings.Cut(arg, "=")
		if v, ok := set[name]; ok {
			arg = name + "=" + v
		}
		out = append(out, arg)
	}
	return out
}

// serviceAccountKubeConfig writes a kubeconfig that reaches c as the
// ServiceAccount name of the install's namespace, with a token the API
// server issues for it, as a Pod's projected token would.
func serviceAccountKubeConfig(t *testing.T, c *cluster.Cluster, cl client.Client, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}
	if err := cl.SubResource("token").Create(t.Context(), sa, req); err != nil {
		t.Fatalf("requesting a token of %s/%s: %v", namespace, name, err)
	}
	config := clientcmdapi.NewConfig()
	config.Clusters["test"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
	config.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: req.Status.Token}
	config.Contexts["pod"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: name, Namespace: namespace}
	config.CurrentContext = "pod"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*config, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// withScheme returns a client of c that knows every kind uprev serves.
func withScheme(t *testing.T, c *cluster.Cluster) client.Client {
	t.Helper()
	scheme, err := controllers.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}
