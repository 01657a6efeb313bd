package tenancy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// maxSourceAnswerRSSMiB bounds the manager's peak RSS while tenants'
// sources answer with the hostile documents below (issue 31: the default
// Deployment's limit is 1 GiB; these answers took the manager to 1.3-1.8
// GiB before).
const maxSourceAnswerRSSMiB = 256

// TestHostileSourceAnswersKeepTheManagerSmall runs the manager binary
// against two tenants' ReleaseSources: a 140-byte feed of nested arrays
// read with a JSONPath of recursive descents (it took the manager from
// 112 MiB to 1.8 GiB and held a worker for a minute), and a 14.3 MiB
// Helm index.yaml of 120 charts (inside the 32 MiB bound; decoded whole,
// 1.3-1.6 GiB). Each source fails or answers within its timeout plus 10 s,
// and the manager's peak RSS, read from /proc, stays under 256 MiB.
func TestHostileSourceAnswersKeepTheManagerSmall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	feed := strings.Repeat("[", 70) + strings.Repeat("]", 70)
	g.Expect(feed).To(HaveLen(140))
	index := helmIndexOf(14<<20 + 300<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/feed.json":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, feed)
		case "/index.yaml":
			_, _ = io.WriteString(w, index)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)

	ns := newNamespace(t, "sources")
	const timeout = 10 * time.Second
	semver := imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=0.0.0"}}
	jsonpath := &uprevv1.ReleaseSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "descents"},
		Spec: uprevv1.ReleaseSourceSpec{
			Interval: metav1.Duration{Duration: time.Hour}, Timeout: &metav1.Duration{Duration: timeout},
			HTTPJSON: &uprevv1.HTTPJSONSource{URL: srv.URL + "/feed.json", Versions: "{..[*]..[*]..[*]..[*]..[*]}"},
			Policy:   semver,
		},
	}
	helm := &uprevv1.ReleaseSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "large-index"},
		Spec: uprevv1.ReleaseSourceSpec{
			Interval: metav1.Duration{Duration: time.Hour}, Timeout: &metav1.Duration{Duration: timeout},
			HelmRepository: &uprevv1.HelmRepositorySource{URL: srv.URL, Chart: "chart-042"},
			Policy:         semver,
		},
	}
	mgr := startManager(t)
	created := time.Now()
	g.Expect(k8s.Create(ctx, jsonpath)).To(Succeed())
	g.Expect(k8s.Create(ctx, helm)).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(jsonpath), jsonpath)).To(Succeed())
		ready := apimeta.FindStatusCondition(jsonpath.Status.Conditions, meta.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Message).To(ContainSubstring(".."), "the refusal names the recursive descent")
	}).WithTimeout(timeout+10*time.Second).Should(Succeed(), "the JSONPath source fails within its timeout plus 10 s")
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(helm), helm)).To(Succeed())
		g.Expect(helm.Status.Latest).NotTo(BeNil(), "%v", helm.Status.Conditions)
		g.Expect(helm.Status.Latest.Version).To(Equal("1.0.119"))
	}).WithTimeout(timeout+10*time.Second).Should(Succeed(), "the Helm source answers within its timeout plus 10 s")
	t.Logf("both sources done %s after their creation", time.Since(created).Round(time.Millisecond))

	_, hwm := memoryOf(t, mgr)
	t.Logf("manager's peak RSS: %d MiB", hwm>>10)
	g.Expect(hwm>>10).To(BeNumerically("<", maxSourceAnswerRSSMiB), "peak RSS in MiB")
}

// helmIndexOf returns an index.yaml of at least size bytes, as `helm repo
// index` writes one, of charts chart-000, chart-001... (at least 43 of
// them) with 120 versions each, 1.0.0 to 1.0.119, and the fields of a
// public repository's index.
func helmIndexOf(size int) string {
	var b strings.Builder
	b.Grow(size + 64<<10)
	b.WriteString("apiVersion: v1\nentries:\n")
	for c := 0; b.Len() < size || c <= 42; c++ {
		name := fmt.Sprintf("chart-%03d", c)
		fmt.Fprintf(&b, "  %s:\n", name)
		for v := range 120 {
			fmt.Fprintf(&b, "  - apiVersion: v2\n    appVersion: 1.0.%d\n    created: \"2026-11-01T12:00:00Z\"\n", v)
			fmt.Fprintf(&b, "    description: %s is a chart of a public repository, with a description long enough to be typical of one\n", name)
			fmt.Fprintf(&b, "    digest: %064x\n    home: https://example.com/%s\n", c*1000+v, name)
			b.WriteString("    keywords:\n    - monitoring\n    - metrics\n    maintainers:\n    - email: team@example.com\n      name: team\n")
			fmt.Fprintf(&b, "    name: %s\n    sources:\n    - https://github.com/example/%s\n", name, name)
			fmt.Fprintf(&b, "    urls:\n    - charts/%s-1.0.%d.tgz\n    version: 1.0.%d\n", name, v, v)
		}
	}
	b.WriteString("generated: \"2026-11-01T12:00:00Z\"\n")
	return b.String()
}
