package tenancy

import (
	"bufio"
	"context"
	"fmt"
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
)

// maxTagListAttackRSSMiB bounds the manager's peak RSS while a tenant's
// registry answers a tag list with a million tags (docs/operations.md,
// Memory bounds).
const maxTagListAttackRSSMiB = 200

// TestMillionTagAnswerIsRefusedWithinBoundedMemory: a tenant's registry
// answers the tag list of its repository with 10⁶ tags in one page. The
// manager stops reading at its bound (100,000 tags), reports
// TagListTooLarge on the repository, stores nothing, and its peak RSS
// stays small.
func TestMillionTagAnswerIsRefusedWithinBoundedMemory(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "taglist")
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/":
			w.WriteHeader(http.StatusOK)
		case strings.HasSuffix(r.URL.Path, "/tags/list"):
			w.Header().Set("Content-Type", "application/json")
			// The manager hangs up once it has read its bound: the
			// writes fail then, as they should.
			out := bufio.NewWriter(w)
			_, _ = fmt.Fprint(out, `{"name":"acme/agent","tags":[`)
			for i := range 1_000_000 {
				if i > 0 {
					_ = out.WriteByte(',')
				}
				_, _ = fmt.Fprintf(out, `"1.0.%d"`, i)
			}
			_, _ = fmt.Fprint(out, `]}`)
			_ = out.Flush()
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(hostile.Close)
	repo := &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec: imagev1.ImageRepositorySpec{
			Image:    strings.TrimPrefix(hostile.URL, "http://") + "/acme/agent",
			Insecure: true,
			Interval: metav1.Duration{Duration: time.Hour},
		},
	}
	g.Expect(k8s.Create(ctx, repo)).To(Succeed())
	mgr := startManager(t)

	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(repo), repo)).To(Succeed())
		ready := apimeta.FindStatusCondition(repo.Status.Conditions, meta.ReadyCondition)
		g.Expect(ready).NotTo(BeNil(), "Ready")
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal("TagListTooLarge"))
	}, time.Minute).Should(Succeed())
	g.Expect(repo.Status.LastScanResult).To(BeNil(), "no tags stored")
	_, hwm := memoryOf(t, mgr)
	t.Logf("manager's peak RSS: %d MiB", hwm>>10)
	g.Expect(hwm>>10).To(BeNumerically("<", maxTagListAttackRSSMiB), "peak RSS in MiB")
}
