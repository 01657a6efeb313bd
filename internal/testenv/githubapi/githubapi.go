// Package githubapi is a stand-in for the one endpoint of GitHub's REST API
// that a GitHub App needs to reach a repository: creating an installation
// access token. It follows GitHub's documented contract
// (POST /app/installations/{installation_id}/access_tokens, authenticated
// by a JWT signed RS256 with the app's private key, whose iss is the app
// ID; answered 201 with token and expires_at), so that a client pointed at
// it (githubAppBaseURL) works as against api.github.com.
package githubapi

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// App is a GitHub App installed once, and the stand-in API that issues its
// installation tokens.
type App struct {
	// URL is the API's base URL, for the Secret's githubAppBaseURL.
	URL string
	// ID and InstallationID identify the app and its installation.
	ID, InstallationID int64
	// PrivateKeyPEM is the app's private key, for githubAppPrivateKey.
	PrivateKeyPEM []byte
	// Token is the installation token every exchange returns; the Git
	// server of a test accepts it as the password of x-access-token.
	Token string

	key       *rsa.PrivateKey
	issued    atomic.Int64
	refused   atomic.Int64
	mu        sync.Mutex
	tokenLife time.Duration
}

// Start starts the API for an app with a new key and stops it when the
// test ends. Tokens live an hour, as GitHub's do, until SetTokenLife.
func Start(t testing.TB) *App {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	a := &App{
		ID: 4242, InstallationID: 77,
		PrivateKeyPEM: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		Token:         "ghs_" + rand.Text(),
		key:           key,
		tokenLife:     time.Hour,
	}
	srv := httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(srv.Close)
	a.URL = srv.URL
	return a
}

// SecretData is the data of a Git Secret for this app, with Flux's keys.
func (a *App) SecretData() map[string][]byte {
	return map[string][]byte{
		"githubAppID":             []byte(strconv.FormatInt(a.ID, 10)),
		"githubAppInstallationID": []byte(strconv.FormatInt(a.InstallationID, 10)),
		"githubAppPrivateKey":     a.PrivateKeyPEM,
		"githubAppBaseURL":        []byte(a.URL),
	}
}

// SetTokenLife sets how long the tokens issued from now on are valid; 0
// issues tokens that expire at once.
func (a *App) SetTokenLife(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tokenLife = d
}

// Issued is the number of installation tokens issued.
func (a *App) Issued() int { return int(a.issued.Load()) }

// Refused is the number of exchanges answered 401 or 404.
func (a *App) Refused() int { return int(a.refused.Load()) }

func (a *App) serve(w http.ResponseWriter, r *http.Request) {
	want := fmt.Sprintf("/app/installations/%d/access_tokens", a.InstallationID)
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/app/installations/") {
		a.fail(w, http.StatusNotFound, "Not Found")
		return
	}
	if err := a.verify(r.Header.Get("Authorization")); err != nil {
		a.fail(w, http.StatusUnauthorized, "A JSON web token could not be decoded: "+err.Error())
		return
	}
	if r.URL.Path != want {
		a.fail(w, http.StatusNotFound, "Not Found")
		return
	}
	a.mu.Lock()
	expires := time.Now().Add(a.tokenLife).UTC().Truncate(time.Second)
	a.mu.Unlock()
	a.issued.Add(1)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"token":                a.Token,
		"expires_at":           expires.Format(time.RFC3339),
		"permissions":          map[string]string{"contents": "write"},
		"repository_selection": "all",
	})
}

// verify checks the bearer JWT as GitHub does: RS256 with the app's key,
// iss the app ID, not expired, and at most ten minutes long.
func (a *App) verify(header string) error {
	raw, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		return fmt.Errorf("no bearer token")
	}
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return &a.key.PublicKey, nil },
		jwt.WithValidMethods([]string{"RS256"}))
	if err != nil {
		return err
	}
	if claims.Issuer != strconv.FormatInt(a.ID, 10) {
		return fmt.Errorf("'Issuer' claim ('iss') must be the app ID")
	}
	if claims.IssuedAt == nil || claims.ExpiresAt == nil || claims.ExpiresAt.Sub(claims.IssuedAt.Time) > 10*time.Minute {
		return fmt.Errorf("'Expiration time' claim ('exp') is too far in the future")
	}
	return nil
}

func (a *App) fail(w http.ResponseWriter, status int, message string) {
	a.refused.Add(1)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": message, "documentation_url": "https://docs.github.com/rest"})
}
