package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uprev-dev/uprev/hack/demo/internal/notify"
)

// webhookSecret is the Secret the manager's receivers read their token
// from in each namespace (--webhook-secret-name's default).
const webhookSecret = "uprev-webhook"

// enableWebhooks makes the receivers' token, as a person does with
// `kubectl create secret generic uprev-webhook`, and records where the
// manager listens at addr, so that the demo's Git server and push-tag
// notify it of each push as a real registry and Git server would. The
// demo's intervals are long (5m, examples/getting-started): every change
// you see moves through these notifications.
func (d *demo) enableWebhooks(ctx context.Context, addr string) error {
	random := make([]byte, 32)
	if _, err := rand.Read(random); err != nil {
		return err
	}
	token := hex.EncodeToString(random)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: webhookSecret},
		StringData: map[string]string{"token": token},
	}
	if err := d.mgmt.Create(ctx, secret); err != nil {
		return fmt.Errorf("creating the webhook Secret: %w", err)
	}
	d.state.Webhook = &notify.Endpoint{URL: "http://" + addr, Namespace: namespace, Token: token}
	d.webhook.Store(d.state.Webhook)
	return nil
}

// gitPushed is the Git server's hook after each push: it sends the push
// event a Gitea server sends, so that the Syncs and the automation of the
// repository run at once. Before the manager listens there is no one to
// tell; a failure is logged, as a Git server logs a failed delivery.
func (d *demo) gitPushed(repo string) {
	e := d.webhook.Load()
	if e == nil {
		return
	}
	if err := e.GitPush(context.Background(), d.git.HTTPURL(repo), "main"); err != nil {
		_, _ = fmt.Fprintf(d.logs, "git push webhook: %v\n", err)
	}
}
