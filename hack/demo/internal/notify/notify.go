// Package notify sends the webhooks a registry and a Git server send on a
// push, to the receivers of the demo's manager (docs/webhooks.md): the
// demo's in-process registry and Git server are test servers that send
// none, so the demo sends them for them, in the formats real servers use.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/uprev-dev/uprev/internal/outbound"
	"github.com/uprev-dev/uprev/internal/webhook"
)

// Endpoint is where the manager's webhook receivers listen, and the token
// of the namespace whose objects the demo's pushes trigger.
type Endpoint struct {
	// URL is the receivers' base URL, http://host:port.
	URL string `json:"url"`
	// Namespace is the namespace whose receivers are called.
	Namespace string `json:"namespace"`
	// Token is the token of the namespace's uprev-webhook Secret.
	Token string `json:"token"`
}

// timeout bounds one notification.
const timeout = 10 * time.Second

// httpClient sends the notifications through the outbound layer, as every
// call of the manager is sent.
var httpClient = outbound.Installed().Client(timeout)

// RegistryPush tells the manager that host/repository:tag was pushed, as a
// CNCF distribution registry's notification does.
func (e Endpoint) RegistryPush(ctx context.Context, host, repository, tag string) error {
	body, err := json.Marshal(map[string]any{"events": []map[string]any{{
		"action":  "push",
		"target":  map[string]string{"repository": repository, "tag": tag},
		"request": map[string]string{"host": host},
	}}})
	if err != nil {
		return err
	}
	return e.post(ctx, "registry", body, map[string]string{"Authorization": "Bearer " + e.Token})
}

// GitPush tells the manager that branch of the repository at cloneURL was
// pushed to, as a Gitea push event, signed with the token, does.
func (e Endpoint) GitPush(ctx context.Context, cloneURL, branch string) error {
	body, err := json.Marshal(map[string]any{
		"ref":        "refs/heads/" + branch,
		"repository": map[string]string{"clone_url": cloneURL},
	})
	if err != nil {
		return err
	}
	return e.post(ctx, "git", body, map[string]string{
		"X-Gitea-Event":         "push",
		webhook.SignatureHeader: webhook.Sign([]byte(e.Token), body),
	})
}

// post sends body to the receiver of kind, with headers.
func (e Endpoint) post(ctx context.Context, kind string, body []byte, headers map[string]string) error {
	url := fmt.Sprintf("%s/hooks/%s/%s", e.URL, kind, e.Namespace)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("notifying %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("notifying %s: %s: %s", url, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}
