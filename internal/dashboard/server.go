package dashboard

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/printable"
)

// web holds the page's template, script and style sheet.
//
//go:embed web
var web embed.FS

// Timing of the live updates.
const (
	// minRefresh is the least time between two renderings: a burst of
	// changes (a rollout writes status many times) makes one.
	minRefresh = 500 * time.Millisecond
	// fullRefresh renders the page this often without a change, so that
	// ages move on and a read that failed is tried again.
	fullRefresh = 30 * time.Second
	// rewatch is the wait before a watch that failed is opened again.
	rewatch = 5 * time.Second
)

// Options configure a Server.
type Options struct {
	// Client reads and watches the cluster with the user's credentials.
	Client client.WithWatch
	// Namespace is the namespace shown; empty means every namespace.
	Namespace string
	// Address is the address the server listens on, an IP address and
	// port (the listener's). It decides which Host headers the server
	// answers (see allowedHost) and whether requests need Token.
	Address string
	// Token is the secret every request must carry when Address is not a
	// loopback address: as the query parameter `token` once (the answer
	// sets it as a cookie and sends the browser on without it), the
	// cookie, or an `Authorization: Bearer` header. New refuses a
	// non-loopback Address without one; NewToken makes one. On a loopback
	// address it is not asked for, unless set.
	Token string
	// Clock gives the page's times and the refresh timers; nil means the
	// real clock.
	Clock clock.WithTicker
}

// Server serves the dashboard: the page (/), its live updates
// (/events), each object as YAML (/object/KIND/NAMESPACE/NAME) and the
// script and style sheet (/web/).
type Server struct {
	o Options
	// ip is the address the server listens on, from o.Address.
	ip   net.IP
	tmpl *template.Template
	mux  *http.ServeMux
	// changed is poked by the watches; Run renders the page again.
	changed chan struct{}

	mu sync.Mutex
	// main is the latest rendering of the page's main element; nil
	// until Run rendered it.
	main []byte
	// subscribers get each new rendering.
	subscribers map[chan []byte]struct{}
}

// New returns a Server; Run keeps its page up to date.
func New(o Options) (*Server, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	ip, err := listenIP(o.Address)
	if err != nil {
		return nil, err
	}
	if !ip.IsLoopback() && o.Token == "" {
		return nil, fmt.Errorf("serving the dashboard on %s, which is not a loopback address, needs a token", o.Address)
	}
	tmpl, err := template.New("page.html").Funcs(funcs).ParseFS(web, "web/page.html")
	if err != nil {
		return nil, fmt.Errorf("parsing the dashboard's template: %w", err)
	}
	s := &Server{o: o, ip: ip, tmpl: tmpl, mux: http.NewServeMux(), changed: make(chan struct{}, 1), subscribers: map[chan []byte]struct{}{}}
	static, err := fs.Sub(web, "web")
	if err != nil {
		return nil, fmt.Errorf("reading the dashboard's files: %w", err)
	}
	s.mux.Handle("GET /web/", http.StripPrefix("/web/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /{$}", s.servePage)
	s.mux.HandleFunc("GET /events", s.serveEvents)
	s.mux.HandleFunc("GET /object/{kind}/{namespace}/{name}", s.serveObject)
	return s, nil
}

// ServeHTTP answers requests whose Host header names this server (see
// allowedHost): a page of another site that a DNS name pointed at the
// dashboard's address (DNS rebinding) gets nothing, since the page reads
// the cluster with the user's rights. On an address other than loopback
// it asks for the token too (see Options.Token).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.allowedHost(r.Host) {
		http.Error(w, fmt.Sprintf("this dashboard answers requests to %s only, not to %s", s.o.Address, r.Host), http.StatusForbidden)
		return
	}
	w.Header().Set("Content-Security-Policy", "default-src 'self'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if !s.authorized(w, r) {
		return
	}
	s.mux.ServeHTTP(w, r)
}

// tokenCookie is the cookie that carries the token once a browser showed
// it.
const tokenCookie = "uprev-dashboard-token"

// tokenBytes is how many random bytes a token made by NewToken has.
const tokenBytes = 32

// Run watches the cluster and renders the page after each change, until
// ctx ends.
func (s *Server) Run(ctx context.Context) {
	for _, list := range []client.ObjectList{
		&uprevv1.SyncList{}, &uprevv1.SyncTargetList{}, &uprevv1.UpdateAutomationList{}, &iacv1.ImageUpdateAutomationList{}, &uprevv1.ReleaseGateList{},
		&imagev1.ImagePolicyList{}, &imagev1.ImageRepositoryList{}, &eventsv1.EventList{},
	} {
		go s.watch(ctx, list)
	}
	ticker := s.o.Clock.NewTicker(fullRefresh)
	defer ticker.Stop()
	for {
		s.render(ctx)
		select {
		case <-ctx.Done():
			return
		case <-s.o.Clock.After(minRefresh):
		}
		select {
		case <-ctx.Done():
			return
		case <-s.changed:
		case <-ticker.C():
		}
	}
}

// watch pokes s.changed on every change of the objects of list's kind,
// opening the watch again when it ends or fails, until ctx ends.
func (s *Server) watch(ctx context.Context, list client.ObjectList) {
	for ctx.Err() == nil {
		w, err := s.o.Client.Watch(ctx, list, client.InNamespace(s.o.Namespace))
		if err == nil {
			for range w.ResultChan() {
				s.poke()
			}
			w.Stop()
		}
		select {
		case <-ctx.Done():
		case <-s.o.Clock.After(rewatch):
		}
	}
}

// poke asks Run to render the page again.
func (s *Server) poke() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// render reads the cluster, renders the page's main element and sends it
// to every subscriber.
func (s *Server) render(ctx context.Context) {
	page := Build(Load(ctx, s.o.Client, s.o.Namespace, s.o.Clock.Now()), s.o.Namespace)
	var buf bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&buf, "main", page); err != nil {
		buf.Reset()
		template.HTMLEscape(&buf, []byte("rendering the page: "+err.Error()))
	}
	main := buf.Bytes()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.main = main
	for ch := range s.subscribers {
		select {
		case <-ch: // a slow reader gets the newest rendering only
		default:
		}
		ch <- main
	}
}

// current returns the latest rendering, rendering it first when Run has
// not yet.
func (s *Server) current(ctx context.Context) []byte {
	s.mu.Lock()
	main := s.main
	s.mu.Unlock()
	if main == nil {
		s.render(ctx)
		s.mu.Lock()
		main = s.main
		s.mu.Unlock()
	}
	return main
}

// servePage serves the whole page.
func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	err := s.tmpl.ExecuteTemplate(&buf, "page.html", struct {
		Scope string
		Main  template.HTML
	}{s.o.Namespace, template.HTML(s.current(r.Context()))}) //nolint:gosec // rendered by the same html/template
	if err != nil {
		http.Error(w, "rendering the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// serveEvents streams the page's main element as server-sent events named
// "page": the current rendering at once, then each new one.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return
	}
	ch := make(chan []byte, 1)
	s.mu.Lock()
	s.subscribers[ch] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.subscribers, ch)
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	main := s.current(r.Context())
	for {
		if err := writeEvent(w, main); err != nil {
			return
		}
		flusher.Flush()
		select {
		case <-r.Context().Done():
			return
		case main = <-ch:
		}
	}
}

// writeEvent writes data as one server-sent event named "page".
func writeEvent(w http.ResponseWriter, data []byte) error {
	var buf bytes.Buffer
	buf.WriteString("event: page\n")
	for _, line := range bytes.Split(data, []byte("\n")) {
		buf.WriteString("data: ")
		buf.Write(bytes.TrimSuffix(line, []byte("\r")))
		buf.WriteString("\n")
	}
	buf.WriteString("\n")
	_, err := w.Write(buf.Bytes())
	return err
}

// objectKinds are the kinds /object/ shows, by kind name: those the page
// reads, and no other (no Secret, whatever the user may read).
var objectKinds = map[string]schema.GroupVersionKind{
	uprevv1.SyncKind:                uprevv1.GroupVersion.WithKind(uprevv1.SyncKind),
	uprevv1.SyncTargetKind:          uprevv1.GroupVersion.WithKind(uprevv1.SyncTargetKind),
	uprevv1.UpdateAutomationKind:    uprevv1.GroupVersion.WithKind(uprevv1.UpdateAutomationKind),
	iacv1.ImageUpdateAutomationKind: iacv1.GroupVersion.WithKind(iacv1.ImageUpdateAutomationKind),
	"ReleaseGate":                   uprevv1.GroupVersion.WithKind("ReleaseGate"),
	imagev1.ImagePolicyKind:         imagev1.GroupVersion.WithKind(imagev1.ImagePolicyKind),
	imagev1.ImageRepositoryKind:     imagev1.GroupVersion.WithKind(imagev1.ImageRepositoryKind),
	"Event":                         eventsv1.SchemeGroupVersion.WithKind("Event"),
}

// serveObject serves one object as YAML, as `kubectl get -o yaml` prints
// it: of a kind the page shows (objectKinds), in the namespace the server
// was started for (any with -A). Another namespace is refused before
// anything is read, whatever the user's rights.
func (s *Server) serveObject(w http.ResponseWriter, r *http.Request) {
	gvk, ok := objectKinds[r.PathValue("kind")]
	if namespace := r.PathValue("namespace"); s.o.Namespace != "" && namespace != s.o.Namespace {
		http.Error(w, fmt.Sprintf("this dashboard serves namespace %s only, not %s", s.o.Namespace, namespace), http.StatusForbidden)
		return
	}
	if !ok {
		http.Error(w, "unknown kind "+r.PathValue("kind"), http.StatusNotFound)
		return
	}
	namespace, name := r.PathValue("namespace"), r.PathValue("name")
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := s.o.Client.Get(r.Context(), client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		http.Error(w, fmt.Sprintf("reading %s %s/%s: %v", gvk.Kind, namespace, name, err), http.StatusNotFound)
		return
	}
	obj.SetManagedFields(nil)
	out, err := printable.YAML(obj.Object)
	if err != nil {
		http.Error(w, fmt.Sprintf("encoding %s %s/%s: %v", gvk.Kind, namespace, name, err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintf(w, "# kubectl get %s.%s %s -n %s -o yaml\n", strings.ToLower(gvk.Kind), gvk.Group, name, namespace)
	_, _ = w.Write(out)
}
