package controllers

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/githubapi"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
)

// TestAutomationPushesAsGitHubApp: a Git Secret with Flux's GitHub App
// keys authenticates as the app's installation. The token is fetched once
// and reused while fresh, fetched again when it expires, and neither it
// nor the app's key ever reaches status or events; a key the API refuses
// is AuthenticationFailed.
func TestAutomationPushesAsGitHubApp(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	app := githubapi.Start(t)
	f := pendingUpdate(t, gitserver.WithBasicAuth("x-access-token", app.Token))
	base := f.tip("main")

	// A key that is not the app's is refused by the API.
	stranger := githubapi.Start(t)
	data := app.SecretData()
	data["githubAppPrivateKey"] = stranger.PrivateKeyPEM
	secret := secretWith(f.ns, "github-app", data)
	g.Expect(k8s.Create(ctx, secret)).To(Succeed())
	auto := newAutomation(t, f.ns, f.url, withSecret("github-app"))
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, auto)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(uprevv1.AuthenticationFailedReason))
		g.Expect(c.Message).To(ContainSubstring("GitHub App installation token"))
		g.Expect(conditions.IsStalled(auto)).To(BeFalse(), "retried with backoff")
	}).Should(Succeed())
	g.Expect(app.Refused()).To(BeNumerically(">", 0))
	g.Expect(f.tip("main")).To(Equal(base))

	// With the app's key the pending update goes out as the installation.
	secret.Data = app.SecretData()
	g.Expect(k8s.Update(ctx, secret)).To(Succeed())
	requestReconcile(t, auto)
	sha := waitForPush(t, auto, "")
	g.Expect(f.tip("main")).To(Equal(sha))
	g.Expect(app.Issued()).To(Equal(1))

	// A fresh token is reused by the next run.
	runAutomation(t, auto)
	g.Expect(app.Issued()).To(Equal(1), "the cached token is used while fresh")

	status, err := json.Marshal(getAutomation(g, auto).Status)
	g.Expect(err).NotTo(HaveOccurred())
	notes := strings.Join(eventNotes(automationEvents(g, f.ns, auto.Name)), "\n")
	for _, secretText := range []string{app.Token, string(app.PrivateKeyPEM), string(stranger.PrivateKeyPEM)} {
		g.Expect(string(status)).NotTo(ContainSubstring(secretText))
		g.Expect(notes).NotTo(ContainSubstring(secretText))
	}
}

// TestGitHubAppTokenIsRefreshedWhenItExpires: a token past 80 % of its
// life is not reused; the next run exchanges the key again and succeeds.
func TestGitHubAppTokenIsRefreshedWhenItExpires(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	app := githubapi.Start(t)
	app.SetTokenLife(0)
	f := pendingUpdate(t, gitserver.WithBasicAuth("x-access-token", app.Token))
	g.Expect(k8s.Create(ctx, secretWith(f.ns, "github-app", app.SecretData()))).To(Succeed())
	auto := newAutomation(t, f.ns, f.url, withSecret("github-app"))
	waitForPush(t, auto, "")
	issued := app.Issued()
	g.Expect(issued).To(BeNumerically(">=", 1))

	status := runAutomation(t, auto)
	g.Expect(app.Issued()).To(BeNumerically(">", issued), "an expired token is fetched again")
	g.Expect(status.Conditions).To(ContainElement(And(
		HaveField("Type", "Ready"), HaveField("Status", metav1.ConditionTrue))))
}
