package tenancy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// execKubeConfig returns a kubeconfig whose user is an exec plugin that
// creates marker and then hands out the admin's client certificate.
func execKubeConfig(t *testing.T, marker string) []byte {
	t.Helper()
	cfg, user := adminConfig(t)
	admin := cfg.AuthInfos[user]
	cred, err := json.Marshal(map[string]any{
		"apiVersion": "client.authentication.k8s.io/v1",
		"kind":       "ExecCredential",
		"status": map[string]string{
			"clientCertificateData": string(admin.ClientCertificateData),
			"clientKeyData":         string(admin.ClientKeyData),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "credential.json")
	if err := os.WriteFile(script, cred, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion:      "client.authentication.k8s.io/v1",
		Command:         "/bin/sh",
		Args:            []string{"-c", "touch " + marker + " && cat " + script},
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
	return kubeConfigBytes(t, cfg)
}

// syncOfOneConfigMap starts a repository holding one ConfigMap in ns and a
// Sync of it onto the remote target whose kubeconfig is given.
func syncOfOneConfigMap(t *testing.T, ns string, kubeconfig []byte) (sync func() []metav1.Condition, obj *syncObject) {
	t.Helper()
	git := gitserver.Start(t)
	url := git.InitRepo(t, "apps", "main", map[string]string{"cm.yaml": configMap(ns, "app")})
	createSecret(t, ns, "remote", map[string][]byte{"value": kubeconfig})
	s := newSync(t, ns, url, remoteTarget("remote"))
	return func() []metav1.Condition { return s.Status.Conditions }, s
}

// syncObject is the Sync kind, named for the helpers' signatures.
type syncObject = uprevv1.Sync

func TestExecKubeConfigIsRefused(t *testing.T) {
	g := NewWithT(t)
	startManager(t, "--controllers=sync")
	ns := newNamespace(t, "exec")
	marker := filepath.Join(t.TempDir(), "exec-ran")
	conds, s := syncOfOneConfigMap(t, ns, execKubeConfig(t, marker))

	g.Eventually(readyCondition(s, conds)).Should(And(
		HaveField("Status", metav1.ConditionFalse),
		HaveField("Message", And(ContainSubstring(`"].exec`), ContainSubstring(ns+"/remote"), ContainSubstring("--insecure-kubeconfig-exec")))))
	g.Expect(s.Status.Conditions).To(ContainElement(And(HaveField("Type", meta.StalledCondition), HaveField("Status", metav1.ConditionTrue))))
	g.Expect(marker).NotTo(BeAnExistingFile(), "the exec plugin must never run")
	g.Expect(exists(g, &corev1.ConfigMap{}, ns, "app")).To(BeFalse(), "nothing of the revision is applied")
}

func TestExecKubeConfigAppliesWithOptIn(t *testing.T) {
	g := NewWithT(t)
	startManager(t, "--controllers=sync", "--insecure-kubeconfig-exec")
	ns := newNamespace(t, "exec-opt-in")
	marker := filepath.Join(t.TempDir(), "exec-ran")
	conds, s := syncOfOneConfigMap(t, ns, execKubeConfig(t, marker))

	g.Eventually(readyCondition(s, conds)).Should(HaveField("Status", metav1.ConditionTrue))
	g.Expect(exists(g, &corev1.ConfigMap{}, ns, "app")).To(BeTrue())
	g.Expect(marker).To(BeAnExistingFile(), "the plugin ran, as the flag allows")
}

func TestKubeConfigWithFilePathsAppliesNothing(t *testing.T) {
	g := NewWithT(t)
	startManager(t, "--controllers=sync")
	ns := newNamespace(t, "files")
	cfg, user := adminConfig(t)
	admin := cfg.AuthInfos[user]
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	g.Expect(os.WriteFile(cert, admin.ClientCertificateData, 0o600)).To(Succeed())
	g.Expect(os.WriteFile(key, admin.ClientKeyData, 0o600)).To(Succeed())
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificate: cert, ClientKey: key}
	conds, s := syncOfOneConfigMap(t, ns, kubeConfigBytes(t, cfg))

	g.Eventually(readyCondition(s, conds)).Should(And(
		HaveField("Status", metav1.ConditionFalse),
		HaveField("Message", And(ContainSubstring("client-certificate"), ContainSubstring(ns+"/remote")))))
	g.Expect(s.Status.Conditions).To(ContainElement(And(HaveField("Type", meta.StalledCondition), HaveField("Status", metav1.ConditionTrue))))
	g.Expect(exists(g, &corev1.ConfigMap{}, ns, "app")).To(BeFalse(), "the valid certificate files must not be read")
}
