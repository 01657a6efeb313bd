package tenancy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// Wrong credentials the test hands out; none may appear in the manager's
// output, in status or in events.
const (
	registryPassword = "wrong-registry-password-R1x"
	gitPassword      = "wrong-git-password-G2x"
	targetToken      = "wrong-target-token-T3x"
)

func TestSecretsStayOutOfLogsStatusAndEvents(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	mgr := startManager(t, "--log-level=trace")
	ns := newNamespace(t, "secrets")

	reg := registry.Start(t, registry.WithBasicAuth("reg-user", "right-registry-password"))
	reg.PushTags(t, "acme/agent", "1.0.0")
	dockerConfig := fmt.Sprintf(`{"auths":{%q:{"username":"reg-user","password":%q,"auth":%q}}}`,
		reg.Host(), registryPassword, base64.StdEncoding.EncodeToString([]byte("reg-user:"+registryPassword)))
	createSecret(t, ns, "registry", map[string][]byte{".dockerconfigjson": []byte(dockerConfig)})
	repo := &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec: imagev1.ImageRepositorySpec{
			Image: reg.Image("acme/agent"), Interval: metav1.Duration{Duration: time.Hour},
			SecretRef: &meta.LocalObjectReference{Name: "registry"},
		},
	}
	g.Expect(k8s.Create(ctx, repo)).To(Succeed())

	git := gitserver.Start(t, gitserver.WithBasicAuth("git-user", "right-git-password"))
	url := git.InitRepo(t, "apps", "main", map[string]string{"cm.yaml": configMap(ns, "app")})
	createSecret(t, ns, "git-wrong", map[string][]byte{"username": []byte("git-user"), "password": []byte(gitPassword)})
	createSecret(t, ns, "git-right", map[string][]byte{"username": []byte("git-user"), "password": []byte("right-git-password")})
	auto := &uprevv1.UpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "apps"},
		Spec: uprevv1.UpdateAutomationSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git: uprevv1.GitSpec{
				GitSource: uprevv1.GitSource{URL: url, Ref: uprevv1.GitRef{Branch: "main"}, SecretRef: &meta.LocalObjectReference{Name: "git-wrong"}},
				Commit:    uprevv1.CommitSpec{Author: uprevv1.CommitUser{Name: "uprev", Email: "uprev@example.com"}},
			},
		},
	}
	g.Expect(k8s.Create(ctx, auto)).To(Succeed())

	// A target whose kubeconfig carries a token the cluster refuses.
	cfg, user := adminConfig(t)
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: targetToken}
	createSecret(t, ns, "remote", map[string][]byte{"value": kubeConfigBytes(t, cfg)})
	s := newSync(t, ns, url, remoteTarget("remote"))
	s.Spec.Git.SecretRef = &meta.LocalObjectReference{Name: "git-right"}
	g.Expect(k8s.Update(ctx, s)).To(Succeed())

	for _, obj := range []struct {
		object client.Object
		conds  func() []metav1.Condition
		says   string
	}{
		{repo, func() []metav1.Condition { return repo.Status.Conditions }, "refused the credentials"},
		{auto, func() []metav1.Condition { return auto.Status.Conditions }, "(?i)authentication"},
		{s, func() []metav1.Condition { return s.Status.Conditions }, "(?i)unauthorized|credentials"},
	} {
		g.Eventually(readyCondition(obj.object, obj.conds)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Message", MatchRegexp(obj.says))),
			"%T fails on its wrong credentials", obj.object)
	}

	// The failures' events are sent on their own, after the status: they
	// are read once each object has its Warning, so that what they say is
	// checked too.
	var events eventsv1.EventList
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		var warned []string
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning {
				warned = append(warned, e.Regarding.Name)
			}
		}
		g.Expect(warned).To(ContainElements(repo.Name, auto.Name, s.Name))
	}).Should(Succeed())
	status, err := json.Marshal([]any{repo.Status, auto.Status, s.Status, events.Items})
	g.Expect(err).NotTo(HaveOccurred())
	logs := mgr.Logs(t)
	g.Expect(logs).To(ContainSubstring(ns), "the manager logged about the test's objects")
	for _, secret := range []string{registryPassword, gitPassword, targetToken, dockerConfig} {
		for _, form := range []string{secret, base64.StdEncoding.EncodeToString([]byte(secret))} {
			g.Expect(logs).NotTo(ContainSubstring(form), "the manager's output")
			g.Expect(string(status)).NotTo(ContainSubstring(form), "status and events")
		}
	}
	g.Expect(logs).NotTo(ContainSubstring(base64.StdEncoding.EncodeToString([]byte("reg-user:" + registryPassword))))
}
