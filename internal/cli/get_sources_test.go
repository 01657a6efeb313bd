package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clocktesting "k8s.io/utils/clock/testing"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/syncbuf"
)

// TestGetSources shows ReleaseSources: their kind, the selected version
// and pinned assets; wide what they read and the assets' hashes.
func TestGetSources(t *testing.T) {
	ns := newNamespace(t)
	semver := imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: "~1.30.0"}}
	createWithStatus(t, &uprevv1.ReleaseSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubernetes"},
		Spec: uprevv1.ReleaseSourceSpec{
			Interval:       metav1.Duration{Duration: 3600e9},
			GitHubReleases: &uprevv1.GitHubReleasesSource{Repository: "kubernetes/kubernetes"},
			Policy:         semver,
		},
		Status: uprevv1.ReleaseSourceStatus{
			Conditions: []metav1.Condition{ready(metav1.ConditionTrue, "Succeeded", "resolved to v1.30.2")},
			Latest: &uprevv1.SourceVersion{Version: "v1.30.2", Assets: []uprevv1.PinnedAsset{
				{Name: "kubeadm", URL: "https://dl.k8s.io/release/v1.30.2/bin/linux/amd64/kubeadm", SHA256: "sha256:" + strings.Repeat("ab", 32)},
			}},
		},
	})
	createWithStatus(t, &uprevv1.ReleaseSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "podinfo"},
		Spec: uprevv1.ReleaseSourceSpec{
			Interval:       metav1.Duration{Duration: 3600e9},
			HelmRepository: &uprevv1.HelmRepositorySource{URL: "https://stefanprodan.github.io/podinfo", Chart: "podinfo"},
			Policy:         semver,
		},
	})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{
			args: []string{"get", "sources"},
			want: table(
				"NAME         KIND     LATEST    ASSETS   READY     STATUS                AGE",
				"kubernetes   github   v1.30.2   1        True      resolved to v1.30.2   3d",
				"podinfo      helm                        Unknown                         3d",
			),
		},
		{
			args: []string{"get", "releasesource", "-o", "wide"},
			want: table(
				"NAME         KIND     LATEST    ASSETS   READY     STATUS                AGE   FROM                                                PINNED",
				"kubernetes   github   v1.30.2   1        True      resolved to v1.30.2   3d    kubernetes/kubernetes                               kubeadm=sha256:abababababab",
				"podinfo      helm                        Unknown                         3d    podinfo in https://stefanprodan.github.io/podinfo",
			),
		},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(uprev(t, append(tc.args, "-n", ns, kubeconfigFlag)...)).To(Equal(result{stdout: tc.want}))
		})
	}
	t.Run("watch", func(t *testing.T) {
		g := NewWithT(t)
		ctx, cancel := context.WithCancel(t.Context())
		var stdout, stderr syncbuf.Buffer
		done := make(chan int)
		go func() {
			done <- Execute(ctx, []string{"get", "sources", "-w", "-n", ns, kubeconfigFlag}, Options{
				IOStreams: genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr},
				Clock:     clocktesting.NewFakeClock(now),
			})
		}()
		g.Eventually(stdout.String).Should(MatchRegexp(`^NAME .*\nkubernetes .*\npodinfo .*\n$`))
		podinfo := &uprevv1.ReleaseSource{}
		podinfo.Namespace, podinfo.Name = ns, "podinfo"
		get(t, podinfo)
		podinfo.Spec.Suspend = true
		g.Expect(k8s.Update(t.Context(), podinfo)).To(Succeed())
		g.Eventually(stdout.String).Should(MatchRegexp(`\npodinfo +helm .*\n$`), "the changed source's row")
		cancel()
		g.Eventually(done).Should(Receive(Equal(0)))
		g.Expect(stderr.String()).To(BeEmpty())
	})
	t.Run("nothing", func(t *testing.T) {
		NewWithT(t).Expect(uprev(t, "get", "sources", "-n", "no-such-namespace", kubeconfigFlag)).
			To(Equal(result{stderr: "No sources found in namespace no-such-namespace.\n"}))
	})
}
