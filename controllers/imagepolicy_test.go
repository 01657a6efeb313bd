package controllers

import (
	"context"
	"encoding/json"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevregistry "github.com/uprev-dev/uprev/internal/registry"
	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// newRepository creates an ImageRepository scanning image every hour, so
// that only the test's reconcile requests make it scan again.
func newRepository(t *testing.T, ns, image string, mutate ...func(*imagev1.ImageRepository)) *imagev1.ImageRepository {
	t.Helper()
	repo := &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "repo"},
		Spec:       imagev1.ImageRepositorySpec{Image: image, Interval: metav1.Duration{Duration: time.Hour}},
	}
	for _, m := range mutate {
		m(repo)
	}
	if err := k8s.Create(context.Background(), repo); err != nil {
		t.Fatalf("creating ImageRepository: %v", err)
	}
	return repo
}

// newPolicy creates an ImagePolicy on the repository "repo".
func newPolicy(t *testing.T, ns, name string, choice imagev1.ImagePolicyChoice, mutate ...func(*imagev1.ImagePolicy)) *imagev1.ImagePolicy {
	t.Helper()
	pol := &imagev1.ImagePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: imagev1.ImagePolicySpec{
			ImageRepositoryRef: meta.NamespacedObjectReference{Name: "repo"},
			Policy:             choice,
		},
	}
	for _, m := range mutate {
		m(pol)
	}
	if err := k8s.Create(context.Background(), pol); err != nil {
		t.Fatalf("creating ImagePolicy: %v", err)
	}
	return pol
}

func semverChoice(rng string) imagev1.ImagePolicyChoice {
	return imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: rng}}
}

// requestReconcile sets Flux's reconcile request annotation, as
// `flux reconcile` does.
func requestReconcile(t *testing.T, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	NewWithT(t).Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[meta.ReconcileRequestAnnotation] = time.Now().Format(time.RFC3339Nano)
		obj.SetAnnotations(ann)
		return k8s.Update(ctx, obj)
	}).Should(Succeed())
}

// latestRef returns the policy's latestRef once it is Ready.
func latestRef(g Gomega, key client.ObjectKey) *imagev1.ImageRef {
	var pol imagev1.ImagePolicy
	g.Expect(k8s.Get(context.Background(), key, &pol)).To(Succeed())
	g.Expect(conditions.IsReady(&pol)).To(BeTrue(), "policy not ready: %s", conditions.GetMessage(&pol, meta.ReadyCondition))
	g.Expect(pol.Status.LatestRef).NotTo(BeNil())
	return pol.Status.LatestRef
}

func TestPolicySelectsLatestAndFollowsNewTags(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	image := reg.Image("acme/agent")
	reg.PushTags(t, "acme/agent", "1.0.0", "1.1.0", "2.0.0-rc.1", "sha256-abc.sig", "latest")

	repo := newRepository(t, ns, image)
	pol := newPolicy(t, ns, "agent", semverChoice(">=1.0.0"))

	g.Eventually(func(g Gomega) {
		ref := latestRef(g, client.ObjectKeyFromObject(pol))
		g.Expect(ref.Name).To(Equal(image))
		g.Expect(ref.Tag).To(Equal("1.1.0"))
		g.Expect(ref.Digest).To(BeEmpty(), "digestReflectionPolicy defaults to Never")
	}).Should(Succeed())

	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(repo), repo)).To(Succeed())
	g.Expect(repo.Status.CanonicalImageName).To(Equal(image))
	g.Expect(repo.Status.ObservedExclusionList).To(Equal([]string{`^.*\.sig$`}))
	g.Expect(repo.Status.LastScanResult.TagCount).To(Equal(4), "the .sig tag is excluded before tags are stored")
	g.Expect(repo.Status.LastScanResult.LatestTags).To(Equal([]string{"latest", "2.0.0-rc.1", "1.1.0", "1.0.0"}))
	g.Expect(repo.Status.ObservedGeneration).To(Equal(repo.Generation))

	reg.PushTags(t, "acme/agent", "1.2.0")
	requestReconcile(t, repo)
	g.Eventually(func(g Gomega) {
		g.Expect(latestRef(g, client.ObjectKeyFromObject(pol)).Tag).To(Equal("1.2.0"))
	}).Should(Succeed())
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(pol), pol)).To(Succeed())
	g.Expect(pol.Status.ObservedPreviousRef).NotTo(BeNil())
	g.Expect(pol.Status.ObservedPreviousRef.Tag).To(Equal("1.1.0"))

	g.Eventually(func(g Gomega) {
		var events eventsv1.EventList
		g.Expect(k8s.List(context.Background(), &events, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range events.Items {
			if e.Regarding.Name == pol.Name && e.Reason == "LatestImageChanged" {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).To(ContainElement(ContainSubstring("to " + image + ":1.2.0")))
	}).Should(Succeed())
}

func TestExclusionListChangeRescans(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/app", "1.0.0", "1.1.0-debug", "1.0.1")
	repo := newRepository(t, ns, reg.Image("acme/app"))
	pol := newPolicy(t, ns, "app", semverChoice(">=1.0.0-0"))
	g.Eventually(func(g Gomega) {
		g.Expect(latestRef(g, client.ObjectKeyFromObject(pol)).Tag).To(Equal("1.1.0-debug"))
	}).Should(Succeed())

	g.Eventually(func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(repo), repo); err != nil {
			return err
		}
		repo.Spec.ExclusionList = []string{`-debug$`}
		return k8s.Update(context.Background(), repo)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(latestRef(g, client.ObjectKeyFromObject(pol)).Tag).To(Equal("1.0.1"))
	}).Should(Succeed())
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(repo), repo)).To(Succeed())
	g.Expect(repo.Status.LastScanResult.LatestTags).NotTo(ContainElement("1.1.0-debug"))
}

func TestPolicyKinds(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/build", "main-1700000010-abc", "main-1700000200-def", "main-1700000030-012", "pr-9999999999-x")
	newRepository(t, ns, reg.Image("acme/build"))
	filter := &imagev1.TagFilter{Pattern: `^main-(?P<ts>[0-9]+)-`, Extract: "$ts"}
	numerical := newPolicy(t, ns, "numerical", imagev1.ImagePolicyChoice{Numerical: &imagev1.NumericalPolicy{Order: "asc"}},
		func(p *imagev1.ImagePolicy) { p.Spec.FilterTags = filter })
	alphabetical := newPolicy(t, ns, "alphabetical", imagev1.ImagePolicyChoice{Alphabetical: &imagev1.AlphabeticalPolicy{Order: "desc"}})
	g.Eventually(func(g Gomega) {
		g.Expect(latestRef(g, client.ObjectKeyFromObject(numerical)).Tag).To(Equal("main-1700000200-def"))
		g.Expect(latestRef(g, client.ObjectKeyFromObject(alphabetical)).Tag).To(Equal("main-1700000010-abc"))
	}).Should(Succeed())
}

// readyCondition returns the Ready condition of obj.
func readyCondition(g Gomega, obj conditionsObject) *metav1.Condition {
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	c := conditions.Get(obj, meta.ReadyCondition)
	g.Expect(c).NotTo(BeNil())
	return c
}

// conditionsObject is an object with kstatus conditions.
type conditionsObject interface {
	client.Object
	conditions.Getter
}

func TestInvalidPolicyStallsAndKeepsLastRef(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/api", "1.0.0", "1.3.0")
	newRepository(t, ns, reg.Image("acme/api"))
	pol := newPolicy(t, ns, "api", semverChoice("1.x"))
	g.Eventually(func(g Gomega) {
		g.Expect(latestRef(g, client.ObjectKeyFromObject(pol)).Tag).To(Equal("1.3.0"))
	}).Should(Succeed())

	for _, tc := range []struct {
		name   string
		choice imagev1.ImagePolicyChoice
		filter *imagev1.TagFilter
		reason string
		stall  bool
	}{
		{name: "invalid range", choice: semverChoice("not a range"), reason: invalidPolicyReason, stall: true},
		{name: "invalid regex", choice: semverChoice("1.x"), filter: &imagev1.TagFilter{Pattern: "(["}, reason: invalidPolicyReason, stall: true},
		{name: "nothing matches", choice: semverChoice(">=5.0.0"), reason: noMatchReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Eventually(func() error {
				if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pol), pol); err != nil {
					return err
				}
				pol.Spec.Policy = tc.choice
				pol.Spec.FilterTags = tc.filter
				return k8s.Update(context.Background(), pol)
			}).Should(Succeed())
			g.Eventually(func(g Gomega) {
				c := readyCondition(g, pol)
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(c.Reason).To(Equal(tc.reason))
				g.Expect(conditions.IsStalled(pol)).To(Equal(tc.stall))
			}).Should(Succeed())
			g.Expect(pol.Status.LatestRef.Tag).To(Equal("1.3.0"), "the last good latestRef is kept")
		})
	}
}

func TestPolicyWithoutRepositoryWaits(t *testing.T) {
	t.Parallel() // its namespace and policy are its own
	g := NewWithT(t)
	ns := newNamespace(t)
	pol := newPolicy(t, ns, "orphan", semverChoice(">=1.0.0"))
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, pol)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(meta.DependencyNotReadyReason))
		g.Expect(c.Message).To(ContainSubstring("not found"))
	}).Should(Succeed())
}

// TestNewPolicyWaitsQuietlyForItsRepositorysFirstScan: a new policy whose
// repository is being scanned for the first time writes nothing, however
// long the scan takes, and selects once it ends. The pair's one event is
// the policy's selection: the repository's first scan records none.
func TestNewPolicyWaitsQuietlyForItsRepositorysFirstScan(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/agent", "1.0.0", "1.1.0")
	release := reg.Hold()
	defer release()
	newRepository(t, ns, reg.Image("acme/agent"))
	pol := newPolicy(t, ns, "agent", semverChoice(">=1.0.0"))
	g.Eventually(reg.InFlight).Should(BeNumerically(">=", 1), "the first scan is under way, held by the registry")

	quiet := func(g Gomega) {
		// From the API server: the cache may not have the new policy yet.
		g.Expect(apiServer.Get(context.Background(), client.ObjectKeyFromObject(pol), pol)).To(Succeed())
		g.Expect(pol.Status.Conditions).To(BeEmpty(), "a policy waiting for its repository's first scan writes nothing")
	}
	// The policy has run and waits; past the quiet period of a short
	// wait, a wait that is reported would be by the next retry, within
	// busyRetry.
	g.Consistently(quiet, busyRetry+time.Second, 200*time.Millisecond).Should(Succeed())
	testClock.Advance(quietFor)
	g.Consistently(quiet, busyRetry+2*time.Second, 200*time.Millisecond).Should(Succeed())

	release()
	g.Eventually(func(g Gomega) {
		g.Expect(latestRef(g, client.ObjectKeyFromObject(pol)).Tag).To(Equal("1.1.0"))
	}).Should(Succeed())
	// Events are recorded after the status is written, and sent on their
	// own: the selection's event may reach the API server after its status.
	g.Eventually(func(g Gomega) {
		g.Expect(eventNotes(eventsAbout(g, ns, imagev1.ImagePolicyKind, pol.Name))).To(ConsistOf(
			HavePrefix("Normal Succeeded: Latest image tag for"),
		), "the selection is the policy's only event")
	}).Should(Succeed())
	g.Expect(eventNotes(eventsAbout(g, ns, imagev1.ImageRepositoryKind, "repo"))).To(BeEmpty(),
		"the policy's selection announces the repository's first scan")
}

// TestRepositoryAnnouncesFailureAndRecovery: a repository whose scan
// fails records a Warning event, and one when a scan works again.
func TestRepositoryAnnouncesFailureAndRecovery(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t, registry.WithBasicAuth("robot", "s3cret"))
	reg.PushTags(t, "acme/agent", "1.0.0")
	repo := newRepository(t, ns, reg.Image("acme/agent"))
	g.Eventually(func(g Gomega) {
		g.Expect(eventNotes(eventsAbout(g, ns, imagev1.ImageRepositoryKind, repo.Name))).To(ConsistOf(
			HavePrefix("Warning " + imagev1.AuthenticationFailedReason),
		))
	}).Should(Succeed())

	g.Expect(k8s.Create(context.Background(), dockerConfigSecret(ns, "creds", reg.Host(), "robot", "s3cret"))).To(Succeed())
	g.Eventually(func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(repo), repo); err != nil {
			return err
		}
		repo.Spec.SecretRef = &meta.LocalObjectReference{Name: "creds"}
		return k8s.Update(context.Background(), repo)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(eventNotes(eventsAbout(g, ns, imagev1.ImageRepositoryKind, repo.Name))).To(ConsistOf(
			HavePrefix("Warning "+imagev1.AuthenticationFailedReason),
			Equal("Normal Succeeded: successful scan: found 1 tags"),
		))
	}).Should(Succeed())
}

// TestNewPolicyShowsWhyItsRepositoryWasNotScanned: a new policy whose
// repository cannot be scanned, or is suspended, says so in the
// repository's words at once.
func TestNewPolicyShowsWhyItsRepositoryWasNotScanned(t *testing.T) {
	for _, tc := range []struct {
		name    string
		repo    func(*imagev1.ImageRepository)
		message string
	}{
		{"failing", func(r *imagev1.ImageRepository) { r.Spec.Image = "registry.example.com/Not A Name" },
			`has not been scanned yet: invalid registry configuration: parsing image "registry.example.com/Not A Name"`},
		{"suspended", func(r *imagev1.ImageRepository) { r.Spec.Suspend = true },
			"is suspended and has not been scanned yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			newRepository(t, ns, "registry.example.com/acme/agent", tc.repo)
			pol := newPolicy(t, ns, "agent", semverChoice(">=1.0.0"))
			g.Eventually(func(g Gomega) {
				c := readyCondition(g, pol)
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(c.Reason).To(Equal(meta.DependencyNotReadyReason))
				g.Expect(c.Message).To(ContainSubstring(tc.message))
			}, 5*time.Second).Should(Succeed(), "well within the quiet period of a short wait")
		})
	}
}

// dockerConfigSecret returns a kubernetes.io/dockerconfigjson Secret for host.
func dockerConfigSecret(ns, name, host, username, password string) *corev1.Secret {
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{"username": username, "password": password}}})
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: cfg},
	}
}

func TestBasicAuthFromSecretRef(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t, registry.WithBasicAuth("robot", "s3cret-pw"))
	reg.PushTags(t, "private/app", "1.0.0")
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, dockerConfigSecret(ns, "good", reg.Host(), "robot", "s3cret-pw"))).To(Succeed())
	g.Expect(k8s.Create(ctx, dockerConfigSecret(ns, "bad", reg.Host(), "robot", "wrong-pw-123"))).To(Succeed())

	withSecret := func(name string) func(*imagev1.ImageRepository) {
		return func(r *imagev1.ImageRepository) {
			r.Name = name
			r.Spec.SecretRef = &meta.LocalObjectReference{Name: name}
		}
	}
	good := newRepository(t, ns, reg.Image("private/app"), withSecret("good"))
	bad := newRepository(t, ns, reg.Image("private/app"), withSecret("bad"))
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, good).Status).To(Equal(metav1.ConditionTrue))
		// Conditions are patched before the rest of status.
		g.Expect(good.Status.LastScanResult).NotTo(BeNil())
		g.Expect(good.Status.LastScanResult.TagCount).To(Equal(1))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, bad)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(imagev1.AuthenticationFailedReason))
		g.Expect(c.Message).NotTo(ContainSubstring("wrong-pw-123"))
	}).Should(Succeed())
}

func TestTLSWithCertSecretRef(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t, registry.WithClientCertificates())
	reg.PushTags(t, "secure/app", "2.0.0")
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls"},
		Data:       map[string][]byte{"ca.crt": reg.CACertPEM, "tls.crt": reg.ClientCertPEM, "tls.key": reg.ClientKeyPEM},
	})).To(Succeed())

	repo := newRepository(t, ns, reg.Image("secure/app"), func(r *imagev1.ImageRepository) {
		r.Spec.CertSecretRef = &meta.LocalObjectReference{Name: "tls"}
	})
	untrusted := newRepository(t, ns, reg.Image("secure/app"), func(r *imagev1.ImageRepository) { r.Name = "untrusted" })
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, repo).Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, untrusted)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring("certificate"))
	}).Should(Succeed())
}

func TestRegistryThrottlingIsHonoured(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "busy/app", "1.0.0", "1.0.1")
	reg.ResetCounts()
	reg.ThrottleNext(2, "1")
	start := time.Now()
	repo := newRepository(t, ns, reg.Image("busy/app"))
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, repo).Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())
	g.Expect(time.Since(start)).To(BeNumerically(">=", 2*time.Second), "each 429 waits its Retry-After of 1s")
	counts := reg.Counts()
	g.Expect(counts.Throttled).To(Equal(2))
	g.Expect(counts.Total).To(BeNumerically("<=", 2+2), "two throttled requests, then the ping and one tag page")
}

func TestDigestReflectionAlwaysNoticesRepushedTag(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	first := reg.PushImage(t, "acme/web", "1.0.0")
	newRepository(t, ns, reg.Image("acme/web"))
	pol := newPolicy(t, ns, "web", semverChoice(">=1.0.0"), func(p *imagev1.ImagePolicy) {
		p.Spec.DigestReflectionPolicy = imagev1.ReflectAlways
		p.Spec.Interval = &metav1.Duration{Duration: time.Second}
	})
	g.Eventually(func(g Gomega) {
		g.Expect(latestRef(g, client.ObjectKeyFromObject(pol)).Digest).To(Equal(first))
	}).Should(Succeed())

	second := reg.PushImage(t, "acme/web", "1.0.0")
	g.Expect(second).NotTo(Equal(first))
	g.Eventually(func(g Gomega) {
		ref := latestRef(g, client.ObjectKeyFromObject(pol))
		g.Expect(ref.Tag).To(Equal("1.0.0"))
		g.Expect(ref.Digest).To(Equal(second))
	}).Should(Succeed())
}

func TestCloudProviderRefusesAnotherCloudsRegistry(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo := newRepository(t, ns, "ghcr.io/acme/app", func(r *imagev1.ImageRepository) {
		r.Spec.Provider = "aws"
	})
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, repo)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(conditions.IsStalled(repo)).To(BeTrue())
		g.Expect(c.Reason).To(Equal(imagev1.ImageURLInvalidReason))
		g.Expect(c.Message).To(ContainSubstring("provider aws"))
	}).Should(Succeed())
}

func TestDeletedRepositoryForgetsItsTags(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/gone", "1.0.0")
	repo := newRepository(t, ns, reg.Image("acme/gone"))
	store := uprevregistry.Store{Dir: filepath.Join(storagePath, "tags")}
	g.Eventually(func(g Gomega) {
		tags, err := store.Tags(repoKey(repo))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tags).To(ConsistOf("1.0.0"))
	}).Should(Succeed())

	g.Expect(k8s.Delete(context.Background(), repo)).To(Succeed())
	g.Eventually(func() error {
		_, err := store.Tags(repoKey(repo))
		return err
	}).Should(MatchError(fs.ErrNotExist))
}
