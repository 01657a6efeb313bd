package controllers

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/auth"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uprev-dev/uprev/internal/testenv/registry"
)

const (
	azureTenant   = "00000000-0000-0000-0000-00000000cafe"
	azureClient   = "00000000-0000-0000-0000-00000000beef"
	acrRegistry   = "acme.azurecr.io"
	acrUser       = "00000000-0000-0000-0000-000000000000"
	entraHostname = "login.microsoftonline.com"
)

// entraID stands in for Microsoft Entra ID as MSAL uses it for workload
// identity federation
// (https://learn.microsoft.com/en-us/entra/identity-platform/v2-oauth2-client-creds-grant-flow#third-case-access-token-request-with-a-federated-credential):
// the tenant's OpenID configuration, and a token endpoint that takes the
// federated token as client_assertion.
type entraID struct {
	// accept tells whether the app clientID may sign in with the
	// federated token assertion.
	accept func(clientID, assertion string) bool
	mu     sync.Mutex
	tokens map[string]bool // access tokens handed out
}

// issued tells whether the access token was handed out.
func (e *entraID) issued(token string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tokens[token]
}

// ServeHTTP implements http.Handler.
func (e *entraID) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	base := "https://" + entraHostname + "/" + azureTenant
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/common/discovery/instance":
		_ = json.NewEncoder(w).Encode(map[string]any{
			"tenant_discovery_endpoint": base + "/v2.0/.well-known/openid-configuration",
			"api-version":               "1.1",
			"metadata": []map[string]any{{"preferred_network": entraHostname, "preferred_cache": entraHostname,
				"aliases": []string{entraHostname}}},
		})
	case "/" + azureTenant + "/v2.0/.well-known/openid-configuration":
		_ = json.NewEncoder(w).Encode(map[string]any{
			"token_endpoint":         base + "/oauth2/v2.0/token",
			"authorization_endpoint": base + "/oauth2/v2.0/authorize",
			"issuer":                 base + "/v2.0",
		})
	case "/" + azureTenant + "/oauth2/v2.0/token":
		if err := r.ParseForm(); err != nil || !e.accept(r.PostForm.Get("client_id"), r.PostForm.Get("client_assertion")) {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = fmt.Fprint(w, `{"error":"invalid_client","error_description":"AADSTS700213: No matching federated identity record found."}`)
			return
		}
		e.mu.Lock()
		token := fmt.Sprintf("entra-access-token-%d", len(e.tokens)+1)
		e.tokens[token] = true
		e.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"token_type": "Bearer", "expires_in": 3600, "access_token": token})
	default:
		http.NotFound(w, r)
	}
}

// acrExchange serves ACR's /oauth2/exchange
// (https://github.com/Azure/acr/blob/main/docs/AAD-OAuth.md): an Entra ID
// access token is exchanged for an ACR refresh token, a JWT that the
// registry accepts as the password of the all-zero user.
func acrExchange(entra *entraID, front *tokenRegistry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /oauth2/exchange", func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "access_token" ||
			r.PostForm.Get("service") != acrRegistry || !entra.issued(r.PostForm.Get("access_token")) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		expiry := time.Now().Add(3 * time.Hour)
		claims, _ := json.Marshal(map[string]any{"exp": expiry.Unix(), "iss": "Azure Container Registry"})
		enc := base64.RawURLEncoding
		refresh := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc.EncodeToString(claims) + "." + enc.EncodeToString([]byte("sig"))
		front.issue(acrUser, refresh, expiry)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"refresh_token": refresh})
	})
	mux.Handle("/", front)
	return mux
}

func TestAzureWorkloadIdentityScansWithAnACRToken(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/web", "1.0.0", "1.2.0")
	front := newTokenRegistry(reg.Host())
	const federatedToken = "projected-sa-jwt"
	entra := &entraID{tokens: map[string]bool{}, accept: func(clientID, assertion string) bool {
		return clientID == azureClient && assertion == federatedToken
	}}

	// What Azure Workload Identity's webhook injects into the controller's pod.
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "azure-identity-token")
	g.Expect(os.WriteFile(tokenFile, []byte(federatedToken), 0o600)).To(Succeed())
	t.Setenv("AZURE_CLIENT_ID", azureClient)
	t.Setenv("AZURE_TENANT_ID", azureTenant)
	t.Setenv("AZURE_FEDERATED_TOKEN_FILE", tokenFile)
	t.Setenv("AZURE_AUTHORITY_HOST", "https://"+entraHostname+"/")

	cloud := newCloudNet(t, map[string]http.Handler{
		acrRegistry:   acrExchange(entra, front),
		entraHostname: entra,
	})
	repo := newCloudRepository(t, ns, cloud, acrRegistry+"/acme/web", "azure")
	waitForCloudScan(t, repo, 2)
	g.Expect(front.refused()).To(BeZero())
}

func TestObjectLevelAzureIdentityScansAsTheObjectsServiceAccount(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := registry.Start(t)
	reg.PushTags(t, "acme/tenant", "1.0.0", "1.1.0")
	front := newTokenRegistry(reg.Host())
	const tenantApp = "00000000-0000-0000-0000-0000000a11ce"
	// The app's federated credential names the tenant's service account,
	// with Azure Workload Identity's audience; the controller has no
	// identity of its own.
	entra := &entraID{tokens: map[string]bool{}, accept: func(clientID, assertion string) bool {
		return clientID == tenantApp && serviceAccountTokenFor(assertion, ns, "acr-puller", "api://AzureADTokenExchange")
	}}
	t.Setenv("AZURE_AUTHORITY_HOST", "https://"+entraHostname+"/")
	g.Expect(k8s.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: "acr-puller", Annotations: map[string]string{
			"azure.workload.identity/client-id": tenantApp,
			"azure.workload.identity/tenant-id": azureTenant,
		},
	}})).To(Succeed())
	auth.EnableObjectLevelWorkloadIdentity()
	t.Cleanup(auth.DisableObjectLevelWorkloadIdentity)

	cloud := newCloudNet(t, map[string]http.Handler{
		acrRegistry:   acrExchange(entra, front),
		entraHostname: entra,
	})
	repo := newCloudRepository(t, ns, cloud, acrRegistry+"/acme/tenant", "azure", func(r *imagev1.ImageRepository) {
		r.Spec.ServiceAccountName = "acr-puller"
	})
	waitForCloudScan(t, repo, 2)
	g.Expect(front.refused()).To(BeZero())
}
