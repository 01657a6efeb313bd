package main

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/hack/demo/internal/release"
)

// scriptTemplate is the script of things to try.
//
//go:embed script.tmpl
var scriptTemplate string

// Lines that frame the script in the demo's output; test/demo reads the
// script between them.
const (
	scriptHeader = "Things to try, from the repository root"
	scriptFooter = "Stop the demo with `make demo-down`"
)

// scriptData fills the script template. Paths are as a person types them
// from the repository root.
type scriptData struct {
	// Registry is the OCI registry's host:port.
	Registry string
	// Clone is the clone of the fleet repository.
	Clone string
	// Kubectl is the kubectl binary.
	Kubectl string
	// Uprev is the uprev binary, for its get and release-hold commands.
	Uprev string
	// KubeConfigs are the administrators' kubeconfig files by cluster.
	KubeConfigs map[string]string
	// PushTag is the push-tag command, with --state-dir when the demo's
	// state is not in push-tag's default place.
	PushTag string
	// Pause is the Sync's pause between its waves.
	Pause string
}

// printReady brings the clone up to date, writes the script and the final
// state, and prints where everything is and the script.
func (d *demo) printReady(ctx context.Context) error {
	if err := d.run(ctx, "git", "-C", d.state.Clone, "pull", "-q"); err != nil {
		return err
	}
	var sync uprevv1.Sync
	if err := d.mgmt.Get(ctx, client.ObjectKey{Namespace: namespace, Name: syncName}, &sync); err != nil {
		return err
	}
	data := scriptData{
		Registry:    d.state.Registry,
		Clone:       display(d.state.Clone),
		Kubectl:     display(filepath.Join(d.o.assets, "kubectl")),
		Uprev:       display(d.o.uprev),
		KubeConfigs: map[string]string{},
		PushTag:     pushTagCommand(d.o.stateDir),
	}
	if sync.Spec.Rollout != nil {
		data.Pause = sync.Spec.Rollout.PauseBetweenWaves.Duration.String()
	}
	for name, path := range d.state.KubeConfigs {
		data.KubeConfigs[name] = display(path)
	}
	script, err := renderScript(data)
	if err != nil {
		return err
	}
	scriptFile := d.path("script.sh")
	if err := os.WriteFile(scriptFile, []byte(script), 0o644); err != nil {
		return err
	}
	d.state.Ready = true
	if err := d.state.write(d.o.stateDir); err != nil {
		return err
	}

	kubectl := quote(data.Kubectl)
	var b strings.Builder
	fmt.Fprintf(&b, "\nThe demo fleet is up.\n\n")
	fmt.Fprintf(&b, "  management cluster  %s --kubeconfig %s -n %s get imagepolicies,updateautomations,syncs\n", kubectl, quote(data.KubeConfigs[management]), namespace)
	fmt.Fprintf(&b, "  eu-1 cluster        %s --kubeconfig %s get all -n agent-system\n", kubectl, quote(data.KubeConfigs[eu1]))
	fmt.Fprintf(&b, "  us-1 cluster        %s --kubeconfig %s get all -n agent-system\n", kubectl, quote(data.KubeConfigs[us1]))
	fmt.Fprintf(&b, "  OCI registry        %s (%s, %s; plain HTTP)\n", d.state.Registry, release.AgentImage, release.AgentChart)
	fmt.Fprintf(&b, "  Git repository      %s, cloned in %s\n", d.state.GitURL, data.Clone)
	fmt.Fprintf(&b, "  uprev manager       pid %d, log %s\n", d.manager.Process.Pid, display(d.state.ManagerLog))
	fmt.Fprintf(&b, "                      %s\n", strings.Join(quoteAll(displayArgs(d.state.Manager)), " "))
	fmt.Fprintf(&b, "  metrics             %s (HTTPS; 401 without a bearer token allowed GET /metrics, see docs/operations.md#metrics)\n", d.state.Metrics)
	fmt.Fprintf(&b, "  fleet page          %s dashboard --kubeconfig %s -n %s\n", quote(display(d.o.uprev)), quote(data.KubeConfigs[management]), namespace)
	fmt.Fprintf(&b, "  more                %s, %s\n", display(d.path(stateFile)), display(d.path("demo.log")))
	fmt.Fprintf(&b, "\n%s (also in %s):\n\n", scriptHeader, display(scriptFile))
	b.WriteString(script)
	fmt.Fprintf(&b, "\n%s, or Ctrl-C here.\n", scriptFooter)
	_, err = fmt.Fprint(d.out, b.String())
	return err
}

// renderScript renders the script template with data.
func renderScript(data scriptData) (string, error) {
	tmpl, err := template.New("script").Funcs(template.FuncMap{"q": quote}).Option("missingkey=error").Parse(scriptTemplate)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, data); err != nil {
		return "", fmt.Errorf("rendering the script: %w", err)
	}
	return buf.String(), nil
}

// display returns path relative to the working directory when it is
// inside it, else path itself.
func display(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	rel, err := filepath.Rel(wd, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return path
	}
	return rel
}

// pushTagCommand is the command that pushes a release to the demo whose
// state is in stateDir, and notifies its manager.
func pushTagCommand(stateDir string) string {
	const command = "go run ./hack/demo/push-tag"
	if display(stateDir) == filepath.Join("bin", "demo") {
		return command
	}
	return command + " --state-dir " + quote(display(stateDir))
}

// displayArgs returns a command line with its paths as display shows them.
func displayArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if name, value, ok := strings.Cut(a, "="); ok && filepath.IsAbs(value) {
			out[i] = name + "=" + display(value)
			continue
		}
		if filepath.IsAbs(a) {
			a = display(a)
		}
		out[i] = a
	}
	return out
}

// safeWord matches what a POSIX shell reads as one word without quotes.
var safeWord = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// quote quotes s for a POSIX shell when it needs it.
func quote(s string) string {
	if safeWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// quoteAll quotes every word.
func quoteAll(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = quote(w)
	}
	return out
}
