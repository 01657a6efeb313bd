package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"

	"github.com/uprev-dev/uprev/internal/dashboard"
)

// dashboardLong is the help of `uprev dashboard`.
const dashboardLong = `Serves a read-only web page of the fleet on this machine: which version of
each component every Sync target runs (current, behind, waiting for its wave,
waiting at a gate, held, ahead, failed), each Sync's rollout wave by wave,
each UpdateAutomation's commits, pull request, holds (with the command that
releases them) and refused downgrades, and each component's history. The
page updates itself as the cluster changes; every value links to the object
it comes from.

The page reads the cluster with your kubeconfig and rights, as kubectl does,
and changes nothing. It serves the namespace of -n (every namespace with -A)
and nothing else: an object of another namespace, or of a kind the page does
not show (a Secret), is refused. It answers only requests whose Host header
names its address (on 127.0.0.1: localhost or a loopback address), so that a
web page cannot read it through your browser by pointing its own DNS name at
it. On an address other than loopback (--address 0.0.0.0:7070) anyone who
reaches the port could read what your kubeconfig reads, so the page also asks
for a token it makes at start and prints in the address to open: the first
load with ?token=... sets a cookie; scripts send Authorization: Bearer TOKEN.`

// dashboardOptions are the flags of `uprev dashboard`.
type dashboardOptions struct {
	cluster       *clusterFlags
	allNamespaces bool
	address       string
}

// newDashboardCommand returns `uprev dashboard`.
func newDashboardCommand(opts Options) *cobra.Command {
	o := &dashboardOptions{}
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve a live web page of the fleet on localhost",
		Long:  dashboardLong,
		Example: `  uprev dashboard -n uprev-system
  uprev dashboard -A --address 127.0.0.1:9000`,
		GroupID: groupInspect,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), opts)
		},
	}
	o.cluster = newClusterFlags(cmd.Flags())
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "Show every namespace.")
	cmd.Flags().StringVar(&o.address, "address", "127.0.0.1:7070", "Address to serve the page on; port 0 picks a free one. An address other than loopback needs the token printed at start.")
	return cmd
}

// run serves the dashboard until ctx ends.
func (o *dashboardOptions) run(ctx context.Context, opts Options) error {
	namespace := ""
	if !o.allNamespaces {
		ns, err := o.cluster.namespace()
		if err != nil {
			return err
		}
		namespace = ns
	}
	c, err := o.cluster.client(opts.ErrOut)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.address)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", o.address, err)
	}
	clk, ok := opts.Clock.(clock.WithTicker)
	if !ok {
		clk = clock.RealClock{}
	}
	address := ln.Addr().String()
	token := ""
	needsToken, err := dashboard.NeedsToken(address)
	if err == nil && needsToken {
		token, err = dashboard.NewToken()
	}
	if err != nil {
		_ = ln.Close()
		return err
	}
	srv, err := dashboard.New(dashboard.Options{Client: c, Namespace: namespace, Address: address, Token: token, Clock: clk})
	if err != nil {
		_ = ln.Close()
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go srv.Run(ctx)
	server := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		shutdown, done := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer done()
		_ = server.Shutdown(shutdown)
	}()
	scope := "namespace " + namespace
	if namespace == "" {
		scope = "every namespace"
	}
	// The address is printed for the user to open; the server runs
	// whether or not the terminal took the line.
	if token == "" {
		_, _ = fmt.Fprintf(opts.Out, "Serving the dashboard of %s on http://%s/ (Ctrl-C stops it)\n", scope, address)
	} else {
		_, _ = fmt.Fprintf(opts.Out, "Serving the dashboard of %s on http://%s/?token=%s (Ctrl-C stops it)\n", scope, address, token)
		_, _ = fmt.Fprintf(opts.Out, "It is not on a loopback address: open it with this token (the first load sets a cookie),\nor send the header \"Authorization: Bearer %s\". From another machine, use this machine's IP address.\n", token)
	}
	if err := server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving the dashboard: %w", err)
	}
	return nil
}
