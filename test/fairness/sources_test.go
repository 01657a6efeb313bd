package fairness

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/tarpit"
)

// TestSourceTarpitDoesNotHoldBackOthers: twelve ReleaseSources, JSON feeds
// and Helm repositories, in twelve namespaces, on a server that accepts
// connections and never answers, with a long timeout, are created first;
// another namespace's ReleaseSource, on a server that answers, is Ready
// within 5 s, and the sources on the dead server are not Ready, naming it.
func TestSourceTarpitDoesNotHoldBackOthers(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	tp := tarpit.Start(t)
	startManager(t)
	const timeout = 10 * time.Second
	var dead []*uprevv1.ReleaseSource
	for i := range 12 {
		spec := uprevv1.ReleaseSourceSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Timeout:  &metav1.Duration{Duration: timeout},
			Policy:   imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}},
		}
		if i%2 == 0 {
			spec.HTTPJSON = &uprevv1.HTTPJSONSource{URL: fmt.Sprintf("http://%s/feed-%d.json", tp.Addr(), i), Versions: "{.version}"}
		} else {
			spec.HelmRepository = &uprevv1.HelmRepositorySource{URL: fmt.Sprintf("http://%s/charts-%d", tp.Addr(), i), Chart: "app"}
		}
		rs := &uprevv1.ReleaseSource{ObjectMeta: metav1.ObjectMeta{Namespace: newNamespace(t, "dead-source"), Name: "app"}, Spec: spec}
		create(t, rs)
		dead = append(dead, rs)
	}
	g.Eventually(tp.Accepted, time.Minute).Should(BeNumerically(">=", 2), "the sources reached the dead server")

	feed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"version":"1.2.3"}`)
	}))
	t.Cleanup(feed.Close)
	start := time.Now()
	good := &uprevv1.ReleaseSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: newNamespace(t, "good-source"), Name: "app"},
		Spec: uprevv1.ReleaseSourceSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			HTTPJSON: &uprevv1.HTTPJSONSource{URL: feed.URL + "/version.json", Versions: "{.version}"},
			Policy:   imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}},
		},
	}
	create(t, good)
	g.Eventually(readyCondition(good, func() []metav1.Condition { return good.Status.Conditions }), 5*time.Second).
		WithPolling(25*time.Millisecond).Should(HaveField("Status", metav1.ConditionTrue), "the good source is Ready")
	t.Logf("the good source was Ready %s after it was made", time.Since(start).Round(time.Millisecond))

	for _, rs := range dead {
		g.Eventually(readyCondition(rs, func() []metav1.Condition { return rs.Status.Conditions }), timeout+30*time.Second).Should(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", uprevv1.SourceUnreachableReason),
			HaveField("Message", ContainSubstring(tp.Addr()))),
			"%s/%s is not Ready and names the server that did not answer", rs.Namespace, rs.Name)
	}
}
