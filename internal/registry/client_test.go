package registry

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	. "github.com/onsi/gomega"

	testproxy "github.com/uprev-dev/uprev/internal/testenv/proxy"
	testregistry "github.com/uprev-dev/uprev/internal/testenv/registry"
)

func TestListTagsFollowsPagination(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t, testregistry.WithTagPageSize(100))
	want := semverTags(1050)
	r.PushTags(t, "acme/agent", want...)

	c := newClient(t, ScannerOptions{}, Access{})
	tags, err := c.ListTags(t.Context(), r.Image("acme/agent"))
	g.Expect(err).NotTo(HaveOccurred())
	slices.Sort(tags)
	slices.Sort(want)
	g.Expect(tags).To(Equal(want))
	g.Expect(r.Counts().TagListPages).To(Equal(11))
	g.Expect(r.Counts().ManifestHead + r.Counts().ManifestGet).To(BeZero())
}

func TestDigestIsOneRequest(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t)
	digest := r.PushImage(t, "acme/agent", "1.4.2")
	r.PushImage(t, "acme/agent", "1.4.3")

	c := newClient(t, ScannerOptions{}, Access{})
	got, err := c.Digest(t.Context(), r.Image("acme/agent"), "1.4.2")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(digest))
	g.Expect(r.Counts()).To(Equal(testregistry.Counts{Total: 2, Ping: 1, ManifestHead: 1}))

	// The handshake is reused: a second lookup is the HEAD alone.
	r.ResetCounts()
	_, err = c.Digest(t.Context(), r.Image("acme/agent"), "1.4.3")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Counts()).To(Equal(testregistry.Counts{Total: 1, ManifestHead: 1}))
}

func TestDigestFallsBackToGetWhenHeadIsNotAllowed(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t, testregistry.WithoutManifestHead())
	digest := r.PushImage(t, "acme/agent", "1.4.2")

	c := newClient(t, ScannerOptions{}, Access{})
	got, err := c.Digest(t.Context(), r.Image("acme/agent"), "1.4.2")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(digest))
	g.Expect(r.Counts().ManifestHead).To(Equal(1))
	g.Expect(r.Counts().ManifestGet).To(Equal(1))
}

func TestNotFound(t *testing.T) {
	g := NewWithT(t)
	r := testregistry.Start(t)
	r.PushImage(t, "acme/agent", "1.0.0")
	c := newClient(t, ScannerOptions{}, Access{})

	_, err := c.ListTags(t.Context(), r.Image("acme/missing"))
	g.Expect(err).To(MatchError(ErrNotFound))
	_, err = c.Digest(t.Context(), r.Image("acme/agent"), "9.9.9")
	g.Expect(err).To(MatchError(ErrNotFound))
}

func TestBasicAuth(t *testing.T) {
	r := testregistry.Start(t, testregistry.WithBasicAuth("bot", "s3cret-pa55"))
	r.PushTags(t, "private/agent", "1.0.0", "1.1.0")

	t.Run("good credentials", func(t *testing.T) {
		g := NewWithT(t)
		c := newClient(t, ScannerOptions{}, Access{PullSecrets: []map[string][]byte{dockerConfig(r, "bot", "s3cret-pa55")}})
		tags, err := c.ListTags(t.Context(), r.Image("private/agent"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tags).To(ConsistOf("1.0.0", "1.1.0"))
	})
	t.Run("wrong password", func(t *testing.T) {
		g := NewWithT(t)
		c := newClient(t, ScannerOptions{}, Access{PullSecrets: []map[string][]byte{dockerConfig(r, "bot", "wrong-pa55")}})
		_, err := c.ListTags(t.Context(), r.Image("private/agent"))
		g.Expect(err).To(MatchError(ErrUnauthorized))
		g.Expect(err.Error()).To(ContainSubstring("listing tags of " + r.Image("private/agent")))
		g.Expect(err.Error()).NotTo(ContainSubstring("wrong-pa55"))
		_, err = c.Digest(t.Context(), r.Image("private/agent"), "1.0.0")
		g.Expect(err).To(MatchError(ErrUnauthorized))
		g.Expect(err.Error()).NotTo(ContainSubstring("wrong-pa55"))
	})
	t.Run("no credentials", func(t *testing.T) {
		g := NewWithT(t)
		c := newClient(t, ScannerOptions{}, Access{})
		_, err := c.ListTags(t.Context(), r.Image("private/agent"))
		g.Expect(err).To(MatchError(ErrUnauthorized))
	})
	t.Run("credentials for another registry", func(t *testing.T) {
		g := NewWithT(t)
		other := map[string][]byte{".dockerconfigjson": []byte(`{"auths":{"ghcr.io":{"username":"bot","password":"s3cret-pa55"}}}`)}
		c := newClient(t, ScannerOptions{}, Access{PullSecrets: []map[string][]byte{other}})
		_, err := c.ListTags(t.Context(), r.Image("private/agent"))
		g.Expect(err).To(MatchError(ErrUnauthorized))
	})
}

func TestInvalidAccessSettings(t *testing.T) {
	for name, access := range map[string]Access{
		"pull secret without key":     {PullSecrets: []map[string][]byte{{"username": []byte("bot")}}},
		"pull secret not JSON":        {PullSecrets: []map[string][]byte{{".dockerconfigjson": []byte("{s3cret")}}},
		"CA not PEM":                  {CertSecret: map[string][]byte{"ca.crt": []byte("s3cret")}},
		"client cert without key":     {CertSecret: map[string][]byte{"tls.crt": []byte("x")}},
		"proxy without address":       {ProxySecret: map[string][]byte{"username": []byte("bot")}},
		"proxy address not a URL":     {ProxySecret: map[string][]byte{"address": []byte("http://bot:s3cret@%zz")}},
		"unknown provider":            {Provider: "ibm"},
		"provider with no credential": {Provider: "aws"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := NewScanner(ScannerOptions{}).Client(t.Context(), access)
			g.Expect(err).To(MatchError(ErrInvalidConfig))
			g.Expect(err.Error()).NotTo(ContainSubstring("s3cret"))
		})
	}
}

func TestCloudProviderUsesItsCredentials(t *testing.T) {
	r := testregistry.Start(t, testregistry.WithBasicAuth("oauth2accesstoken", "cloud-t0ken"))
	r.PushTags(t, "private/agent", "1.0.0")
	for _, provider := range []string{"aws", "azure", "gcp"} {
		t.Run(provider, func(t *testing.T) {
			g := NewWithT(t)
			_, err := NewScanner(ScannerOptions{}).Client(t.Context(), Access{Provider: provider})
			g.Expect(err).To(MatchError(ErrInvalidConfig))
			g.Expect(err.Error()).To(ContainSubstring(`"` + provider + `"`))

			// The cloud credentials replace pull secrets, which are ignored.
			creds := authn.FromConfig(authn.AuthConfig{Username: "oauth2accesstoken", Password: "cloud-t0ken"})
			c := newClient(t, ScannerOptions{}, Access{Provider: provider, CloudCredentials: creds, CloudRegistry: r.Host(),
				PullSecrets: []map[string][]byte{dockerConfig(r, "bot", "wrong-pa55")}})
			g.Expect(c.ListTags(t.Context(), r.Image("private/agent"))).To(Equal([]string{"1.0.0"}))
		})
	}
	for _, provider := range []string{"", "generic"} {
		_, err := NewScanner(ScannerOptions{}).Client(t.Context(), Access{Provider: provider})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
	}
}

func TestTLS(t *testing.T) {
	t.Run("server CA", func(t *testing.T) {
		g := NewWithT(t)
		r := testregistry.Start(t, testregistry.WithTLS())
		r.PushTags(t, "acme/agent", "1.0.0")

		c := newClient(t, ScannerOptions{}, Access{CertSecret: map[string][]byte{"ca.crt": r.CACertPEM}})
		tags, err := c.ListTags(t.Context(), r.Image("acme/agent"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tags).To(Equal([]string{"1.0.0"}))

		untrusting := newClient(t, ScannerOptions{}, Access{})
		_, err = untrusting.ListTags(t.Context(), r.Image("acme/agent"))
		g.Expect(err).To(HaveOccurred())
	})
	t.Run("paged tag list on a loopback host", func(t *testing.T) {
		g := NewWithT(t)
		r := testregistry.Start(t, testregistry.WithTLS(), testregistry.WithTagPageSize(2))
		r.PushTags(t, "acme/agent", "a", "b", "c", "d", "e")

		c := newClient(t, ScannerOptions{}, Access{CertSecret: map[string][]byte{"ca.crt": r.CACertPEM}})
		tags, err := c.ListTags(t.Context(), r.Image("acme/agent"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tags).To(Equal([]string{"a", "b", "c", "d", "e"}))
		g.Expect(r.Counts().TagListPages).To(Equal(3))
	})
	t.Run("client certificate", func(t *testing.T) {
		g := NewWithT(t)
		r := testregistry.Start(t, testregistry.WithClientCertificates())
		r.PushTags(t, "acme/agent", "1.0.0")

		c := newClient(t, ScannerOptions{}, Access{CertSecret: map[string][]byte{
			"ca.crt": r.CACertPEM, "tls.crt": r.ClientCertPEM, "tls.key": r.ClientKeyPEM,
		}})
		tags, err := c.ListTags(t.Context(), r.Image("acme/agent"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tags).To(Equal([]string{"1.0.0"}))

		noCert := newClient(t, ScannerOptions{}, Access{CertSecret: map[string][]byte{"ca.crt": r.CACertPEM}})
		_, err = noCert.ListTags(t.Context(), r.Image("acme/agent"))
		g.Expect(err).To(HaveOccurred())
	})
}

func TestProxy(t *testing.T) {
	r := testregistry.Start(t)
	r.PushTags(t, "acme/agent", "1.0.0")
	proxy := testproxy.Start(t, "proxy-bot", "proxy-pa55")

	t.Run("through the proxy", func(t *testing.T) {
		g := NewWithT(t)
		c := newClient(t, ScannerOptions{}, Access{Insecure: true, ProxySecret: map[string][]byte{
			"address": []byte(proxy.URL), "username": []byte("proxy-bot"), "password": []byte("proxy-pa55"),
		}})
		tags, err := c.ListTags(t.Context(), r.Image("acme/agent"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tags).To(Equal([]string{"1.0.0"}))
		g.Expect(proxy.Forwarded()).To(BeNumerically(">=", 2))
	})
	t.Run("wrong proxy password", func(t *testing.T) {
		g := NewWithT(t)
		c := newClient(t, ScannerOptions{}, Access{Insecure: true, ProxySecret: map[string][]byte{
			"address": []byte(proxy.URL), "username": []byte("proxy-bot"), "password": []byte("wrong-pa55"),
		}})
		_, err := c.ListTags(t.Context(), r.Image("acme/agent"))
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).NotTo(ContainSubstring("wrong-pa55"))
	})
}

func TestCanonicalName(t *testing.T) {
	for image, want := range map[string]string{
		"nginx":                       "index.docker.io/library/nginx",
		"docker.io/fluxcd/flux":       "index.docker.io/fluxcd/flux",
		"ghcr.io/acme/agent":          "ghcr.io/acme/agent",
		"registry.example.com:5000/a": "registry.example.com:5000/a",
	} {
		got, err := CanonicalName(image)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		NewWithT(t).Expect(got).To(Equal(want), image)
	}
	for _, image := range []string{"https://ghcr.io/acme/agent", "ghcr.io/acme/agent:1.0", "ghcr.io/acme/agent@sha256:" + sha256Zero, "Not An Image"} {
		_, err := CanonicalName(image)
		NewWithT(t).Expect(err).To(MatchError(ErrInvalidConfig), image)
	}
}

const sha256Zero = "0000000000000000000000000000000000000000000000000000000000000000"

func TestClassifyLeavesOtherErrorsAlone(t *testing.T) {
	g := NewWithT(t)
	err := errors.New("something else")
	g.Expect(classify(err)).To(BeIdenticalTo(err))
}
