package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/sourcekind"
)

// Receiver kinds, the first path segment after /hooks/.
const (
	// KindRegistry receives registry push notifications and triggers
	// ImageRepositories.
	KindRegistry = "registry"
	// KindGit receives Git push notifications and triggers Syncs and
	// UpdateAutomations.
	KindGit = "git"
)

const (
	// DefaultSecretName is the Secret of a namespace that holds its
	// receivers' token.
	DefaultSecretName = "uprev-webhook"
	// TokenKey is the key of the token in the Secret.
	TokenKey = "token"
	// MaxBodyBytes is the largest payload read; larger ones get 413.
	MaxBodyBytes = 1 << 20
	// MaxConcurrentRequests is the most requests served at once; past it,
	// a request is answered 503 with Retry-After at once.
	MaxConcurrentRequests = 32
	// PathPrefix is where the receivers live.
	PathPrefix = "/hooks/"
)

// Options configure the receivers.
type Options struct {
	// Addr is the address the server listens on, such as ":9292".
	Addr string
	// SecretName is the Secret holding each namespace's token; default
	// DefaultSecretName.
	SecretName string
}

// Receiver is the HTTP server of the webhook receivers. It implements
// manager.Runnable and runs on every replica, leader or not. Its RBAC (patch
// on the kinds it triggers) is the role in config/webhook.
type Receiver struct {
	// Options are the address and Secret name.
	Options Options
	// Client lists and annotates the triggered objects.
	Client client.Client
	// Secrets reads the receivers' Secrets; the manager's cache of the
	// Secrets of that name keeps a flood of requests off the API server.
	Secrets client.Reader
}

// Start serves until ctx is done, then shuts the server down gracefully.
func (r *Receiver) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("webhook")
	srv := &http.Server{
		Addr:              r.Options.Addr,
		Handler:           r.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctrl.LoggerInto(context.Background(), log) },
	}
	ln, err := net.Listen("tcp", r.Options.Addr)
	if err != nil {
		return fmt.Errorf("listening for webhooks on %s: %w", r.Options.Addr, err)
	}
	log.Info("Serving webhook receivers", "addr", ln.Addr().String())
	errs := make(chan error, 1)
	go func() { errs <- srv.Serve(ln) }()
	select {
	case err := <-errs:
		return fmt.Errorf("serving webhooks: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("shutting down the webhook server: %w", err)
	}
	return nil
}

// NeedLeaderElection reports false: every replica answers webhooks.
func (r *Receiver) NeedLeaderElection() bool {
	return false
}

// Handler returns the HTTP handler of the receivers, serving at most
// MaxConcurrentRequests requests at once.
func (r *Receiver) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+PathPrefix+"{kind}/{namespace}", r.serve)
	mux.HandleFunc("POST "+PathPrefix+"{kind}/{namespace}/{key}", r.serve)
	return limitConcurrency(mux, MaxConcurrentRequests)
}

// limitConcurrency serves at most n requests with next at once; past it,
// a request is answered 503 with Retry-After: 1 at once, unread.
func limitConcurrency(next http.Handler, n int) http.Handler {
	slots := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			next.ServeHTTP(w, req)
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many requests in progress", http.StatusServiceUnavailable)
		}
	})
}

// Triggered is the response body of an accepted notification.
type Triggered struct {
	// Objects are the objects asked to reconcile, as Kind/namespace/name.
	Objects []string `json:"triggered"`
}

// serve handles one notification: authenticate, parse, trigger.
func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	kind, namespace, key := req.PathValue("kind"), req.PathValue("namespace"), req.PathValue("key")
	log := ctrl.LoggerFrom(req.Context()).WithValues("receiver", kind+"/"+namespace)
	if (kind != KindRegistry && kind != KindGit) || len(validation.IsDNS1123Label(namespace)) > 0 {
		http.NotFound(w, req)
		return
	}
	// What can be checked without the body is checked first: a request
	// without credentials reads neither the Secret nor the body; one with
	// a token in a header or the path is authenticated before its body is
	// read. Only a signature needs the body, read up to MaxBodyBytes.
	if !HasCredentials(req.Header, key) {
		log.V(1).Info("Rejected unauthenticated notification", "reason", "no credentials")
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	token, err := r.token(req.Context(), namespace)
	if err != nil {
		log.Error(err, "Reading the receiver token")
		http.Error(w, "receiver unavailable", http.StatusServiceUnavailable)
		return
	}
	var body []byte
	if SignsBody(req.Header) {
		if body, err = readBody(w, req); err != nil {
			return
		}
	}
	if err := Authenticate(req.Header, body, key, token, kind, namespace); err != nil {
		log.V(1).Info("Rejected unauthenticated notification", "reason", err.Error())
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if !SignsBody(req.Header) {
		if body, err = readBody(w, req); err != nil {
			return
		}
	}
	var triggered []string
	switch kind {
	case KindRegistry:
		triggered, err = r.triggerImagePushes(req.Context(), namespace, req.Header, body)
	case KindGit:
		triggered, err = r.triggerGitPush(req.Context(), namespace, req.Header, body)
		if err == nil {
			var sources []string
			sources, err = r.triggerReleaseSources(req.Context(), namespace, req.Header, body)
			triggered = append(triggered, sources...)
		}
	}
	if errors.Is(err, ErrMalformed) {
		log.V(1).Info("Rejected malformed notification", "reason", err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err != nil {
		log.Error(err, "Triggering reconciles")
		http.Error(w, "triggering failed", http.StatusInternalServerError)
		return
	}
	if len(triggered) > 0 {
		log.Info("Triggered reconciles", "objects", triggered)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(Triggered{Objects: triggered})
}

// readBody reads req's body up to MaxBodyBytes; on an error it has
// answered the request (413 past the bound, 400 otherwise).
func readBody(w http.ResponseWriter, req *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, "payload too large", http.StatusRequestEntityTooLarge)
		} else {
			http.Error(w, "reading payload failed", http.StatusBadRequest)
		}
		return nil, fmt.Errorf("reading the payload: %w", err)
	}
	return body, nil
}

// token returns the token of namespace's receivers; nil when the Secret or
// its key does not exist, which no credentials match.
func (r *Receiver) token(ctx context.Context, namespace string) ([]byte, error) {
	secretName := r.Options.SecretName
	if secretName == "" {
		secretName = DefaultSecretName
	}
	var s corev1.Secret
	if err := r.Secrets.Get(ctx, types.NamespacedName{Namespace: namespace, Name: secretName}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading secret %s/%s: %w", namespace, secretName, err)
	}
	return []byte(strings.TrimSpace(string(s.Data[TokenKey]))), nil
}

// triggerImagePushes requests a scan of every ImageRepository in namespace
// whose image was pushed.
func (r *Receiver) triggerImagePushes(ctx context.Context, namespace string, h http.Header, body []byte) ([]string, error) {
	pushes, err := ParseRegistryPush(h, body)
	if err != nil || len(pushes) == 0 {
		return nil, err
	}
	var list imagev1.ImageRepositoryList
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing image repositories: %w", err)
	}
	var triggered []string
	for i := range list.Items {
		repo := &list.Items[i]
		for _, p := range pushes {
			if p.Matches(repo.Spec.Image) {
				if err := r.requestReconcile(ctx, repo); err != nil {
					return triggered, err
				}
				triggered = append(triggered, "ImageRepository/"+namespace+"/"+repo.Name)
				break
			}
		}
	}
	return triggered, nil
}

// triggerGitPush requests a run of every Sync and UpdateAutomation in
// namespace that reads the pushed repository and ref.
func (r *Receiver) triggerGitPush(ctx context.Context, namespace string, h http.Header, body []byte) ([]string, error) {
	push, err := ParseGitPush(h, body)
	if err != nil || push == nil {
		return nil, err
	}
	var triggered []string
	var syncs uprevv1.SyncList
	if err := r.Client.List(ctx, &syncs, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing syncs: %w", err)
	}
	for i := range syncs.Items {
		s := &syncs.Items[i]
		if push.Matches(s.Spec.Git.URL) && s.Spec.Git.Ref.ReadsPush(push.Ref) {
			if err := r.requestReconcile(ctx, s); err != nil {
				return triggered, err
			}
			triggered = append(triggered, "Sync/"+namespace+"/"+s.Name)
		}
	}
	var autos uprevv1.UpdateAutomationList
	if err := r.Client.List(ctx, &autos, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing update automations: %w", err)
	}
	for i := range autos.Items {
		a := &autos.Items[i]
		if push.Matches(a.Spec.Git.URL) && (a.Spec.Git.Ref.ReadsPush(push.Ref) || uprevv1.GitRef{Branch: a.PushBranch()}.ReadsPush(push.Ref)) {
			if err := r.requestReconcile(ctx, a); err != nil {
				return triggered, err
			}
			triggered = append(triggered, "UpdateAutomation/"+namespace+"/"+a.Name)
		}
	}
	return triggered, nil
}

// triggerReleaseSources requests a scan of every ReleaseSource in
// namespace that a Git notification concerns: a pushed tag (or a push
// naming no ref) of the repository its gitTags reads, a release event of
// the repository its githubReleases reads.
func (r *Receiver) triggerReleaseSources(ctx context.Context, namespace string, h http.Header, body []byte) ([]string, error) {
	push, err := ParseGitPush(h, body)
	if err != nil {
		return nil, err
	}
	if push != nil && push.Ref != "" && !strings.HasPrefix(push.Ref, "refs/tags/") {
		push = nil
	}
	release, err := ParseRelease(h, body)
	if err != nil || (push == nil && release == nil) {
		return nil, err
	}
	var list uprevv1.ReleaseSourceList
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing release sources: %w", err)
	}
	var n sourcekind.Notification
	if push != nil {
		n.TagsPushed = push.Matches
	}
	if release != nil {
		n.Released = release.Repository
	}
	var triggered []string
	for i := range list.Items {
		rs := &list.Items[i]
		kind, err := sourcekind.Of(rs.Spec)
		if err != nil || !kind.Notified(n) {
			continue
		}
		if err := r.requestReconcile(ctx, rs); err != nil {
			return triggered, err
		}
		triggered = append(triggered, "ReleaseSource/"+namespace+"/"+rs.Name)
	}
	return triggered, nil
}

// requestReconcile sets Flux's reconcile request annotation on obj with a
// merge patch, which needs no resourceVersion and so never conflicts.
func (r *Receiver) requestReconcile(ctx context.Context, obj client.Object) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		meta.ReconcileRequestAnnotation: time.Now().Format(time.RFC3339Nano),
	}}})
	if err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("annotating %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	return nil
}
