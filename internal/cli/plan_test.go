package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	iacv1 "github.com/fluxcd/image-automation-controller/api/v1"
	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/manager"
)

const planDigest = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

// planFleet makes a Git checkout whose agent update to 1.4.2 was reverted;
// it returns the directory and the revert's SHA.
func planFleet(t *testing.T) (dir, revert string) {
	t.Helper()
	dir = t.TempDir()
	files := map[string]string{
		"clusters/prod/agent.yaml": "image: ghcr.io/acme/agent:1.4.1 # {\"$imagepolicy\": \"fleet:agent\"}\n",
		"clusters/prod/app.yaml":   "image: ghcr.io/acme/app:2.0.0 # {\"$imagepolicy\": \"fleet:app\"}\n",
		"clusters/prod/kms.yaml":   "image: ghcr.io/acme/kms:2.1.3 # {\"$imagepolicy\": \"kms\"}\n",
	}
	gitserver.RunGit(t, dir, "init", "-q", "-b", "main")
	planCommit(t, dir, "Add fleet", files)
	planCommit(t, dir, "Update agent\n\n"+guard.FormatUpdateTrailer(guard.Update{Policy: "fleet/agent", Old: "1.4.1", New: "1.4.2"}),
		map[string]string{"clusters/prod/agent.yaml": "image: ghcr.io/acme/agent:1.4.2 # {\"$imagepolicy\": \"fleet:agent\"}\n"})
	gitserver.RunGit(t, dir, "revert", "--no-edit", "HEAD")
	return dir, gitserver.RunGit(t, dir, "rev-parse", "HEAD")
}

func TestPlanCommandRefsFile(t *testing.T) {
	dir, revert := planFleet(t)
	refs := filepath.Join(t.TempDir(), "refs.yaml")
	write := func(t *testing.T, content string) {
		t.Helper()
		if err := os.WriteFile(refs, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	held := "held: fleet/agent 1.4.2 (reverted in " + revert[:10] + ")\n"
	cases := []struct {
		name     string
		refs     string
		args     []string
		wantOut  string
		wantErr  string
		wantCode int
	}{
		{
			name: "changes",
			refs: "fleet/agent: {name: ghcr.io/acme/agent, tag: 1.4.2}\nfleet/app: {name: ghcr.io/acme/app, tag: 1.9.0}\nfleet/kms: {name: ghcr.io/acme/kms, tag: 2.2.0, digest: " + planDigest + "}\n",
			args: []string{"--path", "./clusters", "--namespace", "fleet"},
			wantOut: "clusters/prod/kms.yaml: ghcr.io/acme/kms 2.1.3 --> 2.2.0 (" + planDigest + ")\n" +
				held +
				"refused: clusters/prod/agent.yaml: fleet/agent 1.4.1 --> 1.4.2 (held)\n" +
				"refused: clusters/prod/app.yaml: fleet/app 2.0.0 --> 1.9.0 (downgrade)\n",
			wantCode: 2,
		},
		{
			name:     "downgrade allowed",
			refs:     "fleet/app: {name: ghcr.io/acme/app, tag: 1.9.0}\n",
			args:     []string{"--allow-downgrade", "--branch", "main", "--namespace", "fleet"},
			wantOut:  "clusters/prod/app.yaml: ghcr.io/acme/app 2.0.0 --> 1.9.0\n",
			wantCode: 2,
		},
		{
			name:     "nothing to change",
			refs:     "fleet/agent: {name: ghcr.io/acme/agent, tag: 1.4.2}\nfleet/app: {name: ghcr.io/acme/app, tag: 2.0.0}\n",
			args:     []string{"--namespace", "fleet"},
			wantOut:  "no changes\n" + held + "refused: clusters/prod/agent.yaml: fleet/agent 1.4.1 --> 1.4.2 (held)\n",
			wantCode: 0,
		},
		{
			name:     "marker without namespace and no --namespace",
			refs:     "fleet/app: {name: ghcr.io/acme/app, tag: 2.0.1}\n",
			wantOut:  "clusters/prod/app.yaml: ghcr.io/acme/app 2.0.0 --> 2.0.1\n",
			wantErr:  "error: clusters/prod/kms.yaml:1:",
			wantCode: 1,
		},
		{
			name:     "a released hold",
			refs:     "fleet/agent: {name: ghcr.io/acme/agent, tag: 1.4.2}\n",
			args:     []string{"--namespace", "fleet", "--release-holds", "fleet/app 2.0.0, fleet/agent 1.4.2"},
			wantOut:  "clusters/prod/agent.yaml: ghcr.io/acme/agent 1.4.1 --> 1.4.2\n",
			wantCode: 2,
		},
		{
			name:     "every hold released",
			refs:     "fleet/agent: {name: ghcr.io/acme/agent, tag: 1.4.2}\n",
			args:     []string{"--namespace", "fleet", "--release-holds", "*"},
			wantOut:  "clusters/prod/agent.yaml: ghcr.io/acme/agent 1.4.1 --> 1.4.2\n",
			wantCode: 2,
		},
		{
			name:     "another version released",
			refs:     "fleet/agent: {name: ghcr.io/acme/agent, tag: 1.4.2}\n",
			args:     []string{"--namespace", "fleet", "--release-holds", "fleet/agent 1.4.1"},
			wantOut:  "no changes\n" + held + "refused: clusters/prod/agent.yaml: fleet/agent 1.4.1 --> 1.4.2 (held)\n",
			wantCode: 0,
		},
		{name: "bad refs file", refs: "agent: {name: a, tag: '1'}\n", wantErr: "want namespace/name", wantCode: 1},
		{name: "unknown branch", refs: "{}", args: []string{"--branch", "nope"}, wantErr: `branch "nope"`, wantCode: 1},
		{name: "no policies", refs: "{}", args: []string{"--namespace", "fleet"}, wantOut: "no changes\n", wantCode: 0},
		{name: "no source", args: []string{"--refs="}, wantErr: "one of --kubeconfig and --refs is required", wantCode: 1},
		{name: "two sources", args: []string{"--kubeconfig", "x"}, wantErr: "exclude each other", wantCode: 1},
		{name: "an automation without a cluster", args: []string{"--automation", "fleet"}, wantErr: "--automation needs --kubeconfig and --namespace", wantCode: 1},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "unknown flag: --nope", wantCode: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			write(t, tc.refs)
			var stdout, stderr bytes.Buffer
			args := append([]string{"--checkout", dir, "--refs", refs}, tc.args...)
			code := runPlan(context.Background(), args, &stdout, &stderr)
			g.Expect(code).To(Equal(tc.wantCode), "stderr: %s", stderr.String())
			g.Expect(stdout.String()).To(Equal(tc.wantOut))
			if tc.wantErr != "" {
				g.Expect(stderr.String()).To(ContainSubstring(tc.wantErr))
			} else {
				g.Expect(stderr.String()).To(BeEmpty())
			}
			g.Expect(gitserver.RunGit(t, dir, "status", "--porcelain")).To(BeEmpty(), "a plan writes nothing")
		})
	}
}

// planReviewFleet is planFleet with a push branch, uprev/review, on which
// an update of app to 2.1.0 was reverted; main is checked out. It returns
// the directory and the SHAs of the reverts of agent (on main) and app (on
// uprev/review).
func planReviewFleet(t *testing.T) (dir, agentRevert, appRevert string) {
	t.Helper()
	dir, agentRevert = planFleet(t)
	gitserver.RunGit(t, dir, "checkout", "-q", "-b", "uprev/review")
	planCommit(t, dir, "Update app\n\n"+guard.FormatUpdateTrailer(guard.Update{Policy: "fleet/app", Old: "2.0.0", New: "2.1.0"}),
		map[string]string{"clusters/prod/app.yaml": "image: ghcr.io/acme/app:2.1.0 # {\"$imagepolicy\": \"fleet:app\"}\n"})
	gitserver.RunGit(t, dir, "revert", "--no-edit", "HEAD")
	appRevert = gitserver.RunGit(t, dir, "rev-parse", "HEAD")
	gitserver.RunGit(t, dir, "checkout", "-q", "main")
	return dir, agentRevert, appRevert
}

// TestPlanCommandPushBranchAndReleasedHolds shows that a plan applies the
// controller's rules on holds: a revert on the push branch holds, and a
// released hold does not.
func TestPlanCommandPushBranchAndReleasedHolds(t *testing.T) {
	dir, agentRevert, appRevert := planReviewFleet(t)
	refs := filepath.Join(t.TempDir(), "refs.yaml")
	if err := os.WriteFile(refs, []byte("fleet/agent: {name: ghcr.io/acme/agent, tag: 1.4.2}\nfleet/app: {name: ghcr.io/acme/app, tag: 2.1.0}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	agentChange := "clusters/prod/agent.yaml: ghcr.io/acme/agent 1.4.1 --> 1.4.2\n"
	appChange := "clusters/prod/app.yaml: ghcr.io/acme/app 2.0.0 --> 2.1.0\n"
	agentHeld := "held: fleet/agent 1.4.2 (reverted in " + agentRevert[:10] + ")\n"
	appHeld := "held: fleet/app 2.1.0 (reverted in " + appRevert[:10] + ")\n"
	agentRefused := "refused: clusters/prod/agent.yaml: fleet/agent 1.4.1 --> 1.4.2 (held)\n"
	appRefused := "refused: clusters/prod/app.yaml: fleet/app 2.0.0 --> 2.1.0 (held)\n"
	for _, tc := range []struct {
		name     string
		args     []string
		wantOut  string
		wantCode int
	}{
		{name: "the branch alone", wantOut: appChange + agentHeld + agentRefused, wantCode: 2},
		{
			name:    "a revert on the push branch holds",
			args:    []string{"--push-branch", "uprev/review"},
			wantOut: "no changes\n" + agentHeld + appHeld + agentRefused + appRefused,
		},
		{
			name:     "a released hold is written",
			args:     []string{"--release-holds", "fleet/agent 1.4.2"},
			wantOut:  agentChange + appChange,
			wantCode: 2,
		},
		{
			name:     "both",
			args:     []string{"--push-branch", "uprev/review", "--release-holds", "fleet/agent 1.4.2"},
			wantOut:  agentChange + appHeld + appRefused,
			wantCode: 2,
		},
		{name: "a push branch not created yet", args: []string{"--push-branch", "uprev/next"}, wantOut: appChange + agentHeld + agentRefused, wantCode: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var stdout, stderr bytes.Buffer
			code := runPlan(context.Background(), append([]string{"--checkout", dir, "--refs", refs, "--namespace", "fleet"}, tc.args...), &stdout, &stderr)
			g.Expect(code).To(Equal(tc.wantCode), "stderr: %s", stderr.String())
			g.Expect(stdout.String()).To(Equal(tc.wantOut))
			g.Expect(stderr.String()).To(BeEmpty())
		})
	}
}

func TestPlanCommandCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := manager.StartCluster(t)
	k8s := c.Client
	for _, ns := range []string{"fleet", "other"} {
		g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	readyPolicy(t, k8s, "fleet", "agent", &imagev1.ImageRef{Name: "ghcr.io/acme/agent", Tag: "1.4.2"})
	readyPolicy(t, k8s, "fleet", "app", &imagev1.ImageRef{Name: "ghcr.io/acme/app", Tag: "1.9.0"})
	readyPolicy(t, k8s, "fleet", "kms", &imagev1.ImageRef{Name: "ghcr.io/acme/kms", Tag: "2.2.0", Digest: planDigest})
	readyPolicy(t, k8s, "fleet", "pending", nil)
	readyPolicy(t, k8s, "other", "kms", &imagev1.ImageRef{Name: "ghcr.io/acme/kms", Tag: "9.0.0"})
	eligibleAt := metav1.NewTime(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	gated := func(ns, name string, policies ...uprevv1.GatedPolicy) {
		rg := &uprevv1.ReleaseGate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		g.Expect(k8s.Create(ctx, rg)).To(Succeed())
		rg.Status.Policies = policies
		g.Expect(k8s.Status().Update(ctx, rg)).To(Succeed())
	}
	gated("fleet", "prod", uprevv1.GatedPolicy{Name: "agent", Waiting: []uprevv1.WaitingVersion{
		{Tag: "1.5.1", Gate: "promotion", Reason: "eu-staging runs 1.4.2"}, {Tag: "1.5.0", Gate: "promotion", Reason: "eu-staging runs 1.4.2"}}})
	gated("fleet", "age", uprevv1.GatedPolicy{Name: "app", Waiting: []uprevv1.WaitingVersion{
		{Tag: "2.1.0", Gate: "minReleaseAge", EligibleAt: &eligibleAt, Reason: "first seen 2026-11-25T12:00:00Z, younger than 72h0m0s"}}},
		uprevv1.GatedPolicy{Name: "kms"})
	gated("other", "prod", uprevv1.GatedPolicy{Name: "kms", Waiting: []uprevv1.WaitingVersion{{Tag: "9.1.0", Gate: "promotion", Reason: "eu-staging runs 9.0.0"}}})

	kubeconfigFile := c.KubeConfigPath

	dir, revert := planFleet(t)
	var stdout, stderr bytes.Buffer
	code := runPlan(ctx, []string{"--checkout", dir, "--path", "clusters", "--kubeconfig", kubeconfigFile, "-n", "fleet"}, &stdout, &stderr) // -n, as every other command
	g.Expect(code).To(Equal(2), "stderr: %s", stderr.String())
	g.Expect(stdout.String()).To(Equal(
		"clusters/prod/kms.yaml: ghcr.io/acme/kms 2.1.3 --> 2.2.0 (" + planDigest + ")\n" +
			"held: fleet/agent 1.4.2 (reverted in " + revert[:10] + ")\n" +
			"refused: clusters/prod/agent.yaml: fleet/agent 1.4.1 --> 1.4.2 (held)\n" +
			"refused: clusters/prod/app.yaml: fleet/app 2.0.0 --> 1.9.0 (downgrade)\n" +
			"gated: fleet/agent 1.5.1 (promotion at ReleaseGate prod: eu-staging runs 1.4.2)\n" +
			"gated: fleet/app 2.1.0 (minReleaseAge at ReleaseGate age: first seen 2026-11-25T12:00:00Z, younger than 72h0m0s, until 2026-11-28T12:00:00Z)\n"))
	g.Expect(stderr.String()).To(Equal("skipped policies not ready: fleet/pending\n"))
	g.Expect(gitserver.RunGit(t, dir, "status", "--porcelain")).To(BeEmpty(), "a plan writes nothing")

	stdout.Reset()
	stderr.Reset()
	code = runPlan(ctx, []string{"--checkout", dir, "--kubeconfig", filepath.Join(t.TempDir(), "missing")}, &stdout, &stderr)
	g.Expect(code).To(Equal(1))
	g.Expect(stderr.String()).To(HavePrefix("uprev plan: reading kubeconfig"))
}

// TestPlanCommandAutomation shows that with --automation a plan takes the
// push branch, the release annotation and spec.allowDowngrade from the
// UpdateAutomation, and that flags win over them.
func TestPlanCommandAutomation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := manager.StartCluster(t)
	k8s := c.Client
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}})).To(Succeed())
	readyPolicy(t, k8s, "fleet", "agent", &imagev1.ImageRef{Name: "ghcr.io/acme/agent", Tag: "1.4.2"})
	readyPolicy(t, k8s, "fleet", "app", &imagev1.ImageRef{Name: "ghcr.io/acme/app", Tag: "2.1.0"})
	readyPolicy(t, k8s, "fleet", "kms", &imagev1.ImageRef{Name: "ghcr.io/acme/kms", Tag: "2.0.0"})
	auto := &uprevv1.UpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "fleet", Annotations: map[string]string{uprevv1.HoldReleaseAnnotation: "fleet/agent 1.4.2"}},
		Spec: uprevv1.UpdateAutomationSpec{
			Interval: metav1.Duration{Duration: time.Hour},
			Git: uprevv1.GitSpec{
				GitSource: uprevv1.GitSource{URL: "https://git.example.com/fleet.git", Ref: uprevv1.GitRef{Branch: "main"}},
				Push:      &uprevv1.PushSpec{Branch: "uprev/review"},
				Commit:    uprevv1.CommitSpec{Author: uprevv1.CommitUser{Name: "uprev", Email: "uprev@example.com"}},
			},
			AllowDowngrade: true,
		},
	}
	g.Expect(k8s.Create(ctx, auto)).To(Succeed())
	flux := &iacv1.ImageUpdateAutomation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "flux-system", Annotations: map[string]string{uprevv1.HoldReleaseAnnotation: "fleet/agent 1.4.2"}},
		Spec: iacv1.ImageUpdateAutomationSpec{
			SourceRef: iacv1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "flux-system"},
			Interval:  metav1.Duration{Duration: time.Hour},
			GitSpec: &iacv1.GitSpec{
				Commit: iacv1.CommitSpec{Author: iacv1.CommitUser{Name: "flux", Email: "flux@example.com"}},
				Push:   &iacv1.PushSpec{Branch: "uprev/review"},
			},
		},
	}
	g.Expect(k8s.Create(ctx, flux)).To(Succeed())
	kubeconfigFile := c.KubeConfigPath

	dir, agentRevert, appRevert := planReviewFleet(t)
	base := []string{"--checkout", dir, "--path", "clusters", "--kubeconfig", kubeconfigFile, "--namespace", "fleet", "--automation", "fleet"}
	for _, tc := range []struct {
		name     string
		args     []string
		wantOut  string
		wantCode int
		wantErr  string
	}{
		{
			name: "the automation's rules",
			wantOut: "clusters/prod/agent.yaml: ghcr.io/acme/agent 1.4.1 --> 1.4.2\n" +
				"clusters/prod/kms.yaml: ghcr.io/acme/kms 2.1.3 --> 2.0.0\n" +
				"held: fleet/app 2.1.0 (reverted in " + appRevert[:10] + ")\n" +
				"refused: clusters/prod/app.yaml: fleet/app 2.0.0 --> 2.1.0 (held)\n",
			wantCode: 2,
		},
		{
			name: "flags win",
			args: []string{"--push-branch", "main", "--release-holds", "", "--allow-downgrade=false"},
			wantOut: "clusters/prod/app.yaml: ghcr.io/acme/app 2.0.0 --> 2.1.0\n" +
				"held: fleet/agent 1.4.2 (reverted in " + agentRevert[:10] + ")\n" +
				"refused: clusters/prod/agent.yaml: fleet/agent 1.4.1 --> 1.4.2 (held)\n" +
				"refused: clusters/prod/kms.yaml: fleet/kms 2.1.3 --> 2.0.0 (downgrade)\n",
			wantCode: 2,
		},
		{
			name: "a Flux ImageUpdateAutomation's push branch and releases",
			args: []string{"--automation", "flux-system"},
			wantOut: "clusters/prod/agent.yaml: ghcr.io/acme/agent 1.4.1 --> 1.4.2\n" +
				"held: fleet/app 2.1.0 (reverted in " + appRevert[:10] + ")\n" +
				"refused: clusters/prod/app.yaml: fleet/app 2.0.0 --> 2.1.0 (held)\n" +
				"refused: clusters/prod/kms.yaml: fleet/kms 2.1.3 --> 2.0.0 (downgrade)\n",
			wantCode: 2,
		},
		{name: "an unknown automation", args: []string{"--automation", "nope"}, wantErr: "uprev plan: reading UpdateAutomation fleet/nope: no UpdateAutomation or ImageUpdateAutomation of that name", wantCode: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var stdout, stderr bytes.Buffer
			code := runPlan(ctx, append(slices.Clone(base), tc.args...), &stdout, &stderr)
			g.Expect(code).To(Equal(tc.wantCode), "stderr: %s", stderr.String())
			g.Expect(stdout.String()).To(Equal(tc.wantOut))
			if tc.wantErr != "" {
				g.Expect(stderr.String()).To(HavePrefix(tc.wantErr))
			} else {
				g.Expect(stderr.String()).To(BeEmpty())
			}
		})
	}
}

// runPlan runs `uprev plan` with args as the binary does, and returns its
// exit code.
func runPlan(ctx context.Context, args []string, stdout, stderr *bytes.Buffer) int {
	return Execute(ctx, append([]string{"plan"}, args...), Options{IOStreams: genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: stdout, ErrOut: stderr}})
}

// readyPolicy creates a semver ImagePolicy and, when ref is set, gives it
// that latest ref and a Ready condition through the status subresource.
func readyPolicy(t *testing.T, k8s client.Client, namespace, name string, ref *imagev1.ImageRef) {
	t.Helper()
	ctx := context.Background()
	pol := &imagev1.ImagePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: imagev1.ImagePolicySpec{
			ImageRepositoryRef: meta.NamespacedObjectReference{Name: name},
			Policy:             imagev1.ImagePolicyChoice{SemVer: &imagev1.SemVerPolicy{Range: ">=1.0.0"}},
		},
	}
	if err := k8s.Create(ctx, pol); err != nil {
		t.Fatal(err)
	}
	if ref == nil {
		return
	}
	pol.Status.LatestRef = ref
	pol.Status.Conditions = []metav1.Condition{{
		Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: meta.SucceededReason,
		Message: "selected", LastTransitionTime: metav1.Now(), ObservedGeneration: pol.Generation,
	}}
	if err := k8s.Status().Update(ctx, pol); err != nil {
		t.Fatal(err)
	}
}

// planCommit writes files under dir and commits everything with message.
func planCommit(t *testing.T, dir, message string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitserver.RunGit(t, dir, "add", "-A")
	gitserver.RunGit(t, dir, "commit", "-q", "-m", message)
}
