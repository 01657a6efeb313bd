package controllers

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/auth"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

// awsSTS stands in for AWS STS AssumeRoleWithWebIdentity
// (https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRoleWithWebIdentity.html):
// a form POST with Action, RoleArn and WebIdentityToken, answered with
// temporary credentials in XML.
type awsSTS struct {
	// accept tells whether the role may be assumed with the web identity
	// token.
	accept func(roleARN, webIdentityToken string) bool
	mu     sync.Mutex
	keys   map[string]bool // access key IDs handed out
}

// issued tells whether the access key ID was handed out.
func (s *awsSTS) issued(accessKeyID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[accessKeyID]
}

// issue hands out a new access key ID.
func (s *awsSTS) issue() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := fmt.Sprintf("ASIATEST%08d", len(s.keys)+1)
	s.keys[key] = true
	return key
}

// ServeHTTP implements http.Handler.
func (s *awsSTS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("Action") != "AssumeRoleWithWebIdentity" {
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	if !s.accept(r.PostForm.Get("RoleArn"), r.PostForm.Get("WebIdentityToken")) {
		w.WriteHeader(http.StatusForbidden)
		_, _ = fmt.Fprint(w, `<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message></Error></ErrorResponse>`)
		return
	}
	key := s.issue()
	type credentials struct {
		AccessKeyID     string `xml:"AccessKeyId"`
		SecretAccessKey string
		SessionToken    string
		Expiration      string
	}
	var resp struct {
		XMLName     xml.Name    `xml:"https://sts.amazonaws.com/doc/2011-06-15/ AssumeRoleWithWebIdentityResponse"`
		Credentials credentials `xml:"AssumeRoleWithWebIdentityResult>Credentials"`
		RequestID   string      `xml:"ResponseMetadata>RequestId"`
	}
	resp.Credentials = credentials{AccessKeyID: key, SecretAccessKey: "secret-" + key, SessionToken: "session-" + key,
		Expiration: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
	resp.RequestID = "req-1"
	w.Header().Set("Content-Type", "text/xml")
	_ = xml.NewEncoder(w).Encode(resp)
}

// awsECR stands in for ECR GetAuthorizationToken
// (https://docs.aws.amazon.com/AmazonECR/latest/APIReference/API_GetAuthorizationToken.html):
// an awsJson1_1 POST signed with SigV4, answered with a base64 "AWS:<password>"
// token that the registry then accepts for basic auth.
type awsECR struct {
	sts      *awsSTS
	registry *tokenRegistry
	mu       sync.Mutex
	issued   int
}

// ServeHTTP implements http.Handler.
func (e *awsECR) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Amz-Target") != "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken" {
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	// SigV4: Authorization: AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/ecr/aws4_request, ...
	_, rest, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	key, _, _ := strings.Cut(rest, "/")
	if !e.sts.issued(key) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(http.StatusForbidden)
		_, _ = fmt.Fprint(w, `{"__type":"UnrecognizedClientException","message":"The security token included in the request is invalid."}`)
		return
	}
	e.mu.Lock()
	e.issued++
	password := fmt.Sprintf("ecr-password-%d", e.issued)
	e.mu.Unlock()
	expiry := time.Now().Add(12 * time.Hour)
	e.registry.issue("AWS", password, expiry)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"authorizationData": []map[string]any{{
			"authorizationToken": base64.StdEncoding.EncodeToString([]byte("AWS:" + password)),
			"expiresAt":          float64(expiry.Unix()),
			"proxyEndpoint":      "https://" + ecrRegistry,
		}},
	})
}

const ecrRegistry = "123456789012.dkr.ecr.eu-west-1.amazonaws.com"

// ecrHost is the ECR registry of region.
func ecrHost(region string) string {
	return "123456789012.dkr.ecr." + region + ".amazonaws.com"
}

func TestAWSWorkloadIdentityScansWithAnECRToken(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/web", "1.0.0", "1.1.0", "2.0.0")
	front := newTokenRegistry(reg.Host())
	const role, webIdentity = "arn:aws:iam::123456789012:role/uprev", "projected-sa-jwt"
	sts := &awsSTS{keys: map[string]bool{}, accept: func(roleARN, token string) bool {
		return roleARN == role && token == webIdentity
	}}
	ecr := &awsECR{sts: sts, registry: front}

	setIRSAEnv(t, role, webIdentity)
	cloud, host := newAWSNet(t, front, sts, ecr)
	repo := newCloudRepository(t, ns, cloud, host+"/acme/web", "aws")
	waitForCloudScan(t, repo, 3)
	g.Expect(front.refused()).To(BeZero())
}

// setIRSAEnv sets what IRSA injects into the controller's pod: the role to
// assume and a file holding the pod's web identity token, with no other
// AWS configuration to find.
func setIRSAEnv(t *testing.T, role, webIdentity string) {
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(webIdentity), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ROLE_ARN", role)
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", tokenFile)
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CA_BUNDLE", "") // the SDK cannot add it to the library's HTTP client
}

// awsRegions numbers the regions of newAWSNet.
var awsRegions atomic.Int64

// newAWSNet serves the ECR registry front, STS and the ECR API of a region
// of the test's own behind the cloud proxy, sets AWS_REGION to it and
// returns the region's ECR registry host. The manager's token cache, which
// outlives a test, keys controller-level credentials by provider and
// region, so a region per test keeps one test's credentials from another.
func newAWSNet(t *testing.T, front, sts, ecr http.Handler) (*cloudNet, string) {
	region := fmt.Sprintf("test-%d", awsRegions.Add(1))
	t.Setenv("AWS_REGION", region)
	return newCloudNet(t, map[string]http.Handler{
		ecrHost(region):                        front,
		"sts." + region + ".amazonaws.com":     sts,
		"api.ecr." + region + ".amazonaws.com": ecr,
	}), ecrHost(region)
}

// serviceAccountTokenFor tells whether token is a Kubernetes service account
// token of namespace/name for audience. Its signature is the apiserver's
// business; the claims are what STS would match against the role's trust
// policy.
func serviceAccountTokenFor(token, namespace, name, audience string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var claims struct {
		Sub string   `json:"sub"`
		Aud []string `json:"aud"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return false
	}
	return claims.Sub == "system:serviceaccount:"+namespace+":"+name && slices.Contains(claims.Aud, audience)
}

func TestObjectLevelAWSIdentityNeedsTheFeatureGate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/web", "1.0.0")
	front := newTokenRegistry(reg.Host())
	const role = "arn:aws:iam::123456789012:role/tenant"
	sts := &awsSTS{keys: map[string]bool{}, accept: func(roleARN, token string) bool {
		return roleARN == role && serviceAccountTokenFor(token, ns, "web-puller", "sts.amazonaws.com")
	}}
	ecr := &awsECR{sts: sts, registry: front}
	t.Setenv("AWS_CA_BUNDLE", "") // the SDK cannot add it to the library's HTTP client
	g.Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: "web-puller", Annotations: map[string]string{"eks.amazonaws.com/role-arn": role},
	}})).To(Succeed())

	cloud, host := newAWSNet(t, front, sts, ecr)
	repo := newCloudRepository(t, ns, cloud, host+"/acme/web", "aws", func(r *imagev1.ImageRepository) {
		r.Spec.ServiceAccountName = "web-puller"
	})
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, repo)
		g.Expect(conditions.IsStalled(repo)).To(BeTrue())
		g.Expect(c.Reason).To(Equal(meta.FeatureGateDisabledReason))
		g.Expect(c.Message).To(ContainSubstring("--feature-gates=ObjectLevelWorkloadIdentity=true"))
	}).Should(Succeed())

	auth.EnableObjectLevelWorkloadIdentity()
	t.Cleanup(auth.DisableObjectLevelWorkloadIdentity)
	requestReconcile(t, repo)
	waitForCloudScan(t, repo, 1)
	g.Expect(front.refused()).To(BeZero())
}

func TestRefusedWebIdentityIsReportedWithoutTheToken(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	front := newTokenRegistry(reg.Host())
	// The role's trust policy does not name uprev's service account.
	sts := &awsSTS{keys: map[string]bool{}, accept: func(string, string) bool { return false }}
	ecr := &awsECR{sts: sts, registry: front}
	setIRSAEnv(t, "arn:aws:iam::123456789012:role/other", "projected-sa-jwt")
	cloud, host := newAWSNet(t, front, sts, ecr)
	repo := newCloudRepository(t, ns, cloud, host+"/acme/web", "aws")
	g.Eventually(func(g Gomega) {
		c := readyCondition(g, repo)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(imagev1.AuthenticationFailedReason))
		g.Expect(c.Message).To(ContainSubstring("getting aws registry credentials"))
		g.Expect(c.Message).To(ContainSubstring("AccessDenied"))
		g.Expect(c.Message).NotTo(ContainSubstring("projected-sa-jwt"))
		g.Expect(conditions.IsStalled(repo)).To(BeFalse(), "a refused identity is retried")
	}).Should(Succeed())
}

// eksPodIdentityAgent stands in for the EKS Pod Identity Agent's
// credentials endpoint, as the AWS SDKs' container credential provider
// calls it (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html):
// a GET to AWS_CONTAINER_CREDENTIALS_FULL_URI with the pod's projected
// token, read from AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, as its
// Authorization header, answered with temporary credentials in JSON. The
// credentials it hands out are the ones ECR then accepts.
type eksPodIdentityAgent struct {
	sts   *awsSTS
	token string
	calls atomic.Int64
}

// ServeHTTP implements http.Handler.
func (a *eksPodIdentityAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.calls.Add(1)
	if r.Method != http.MethodGet || r.Header.Get("Authorization") != a.token {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = fmt.Fprint(w, `{"code":"AccessDeniedException","message":"The token is not valid"}`)
		return
	}
	key := a.sts.issue()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{
		"AccessKeyId": key, "SecretAccessKey": "secret-" + key, "Token": "session-" + key,
		"AccountId":  "123456789012",
		"Expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	})
}

func TestEKSPodIdentityScansWithAnECRToken(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/pod-identity", "1.0.0", "1.1.0")
	front := newTokenRegistry(reg.Host())
	sts := &awsSTS{keys: map[string]bool{}, accept: func(string, string) bool { return false }}
	ecr := &awsECR{sts: sts, registry: front}
	agent := &eksPodIdentityAgent{sts: sts, token: "eks-pod-identity-token"}
	endpoint := httptest.NewServer(agent)
	t.Cleanup(endpoint.Close)

	// What EKS injects into a pod whose service account has a Pod Identity
	// association; no web identity.
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "eks-pod-identity-token")
	g.Expect(os.WriteFile(tokenFile, []byte(agent.token), 0o600)).To(Succeed())
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", endpoint.URL+"/v1/credentials")
	t.Setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", tokenFile)
	t.Setenv("AWS_ROLE_ARN", "")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CA_BUNDLE", "")

	cloud, host := newAWSNet(t, front, sts, ecr)
	repo := newCloudRepository(t, ns, cloud, host+"/acme/pod-identity", "aws")
	waitForCloudScan(t, repo, 2)
	g.Expect(front.refused()).To(BeZero())
	g.Expect(agent.calls.Load()).To(BeNumerically(">=", 1), "the credentials came from the Pod Identity Agent")
}
