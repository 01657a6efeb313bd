package plan_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/uprev-dev/uprev/internal/guard"
	"github.com/uprev-dev/uprev/internal/plan"
	"github.com/uprev-dev/uprev/internal/update"
)

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	digestC = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

// fleetFiles are the checkout the plans run on.
var fleetFiles = map[string]string{
	"clusters/prod/agent.yaml": "apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n      - name: agent\n        image: ghcr.io/acme/agent:1.4.1 # {\"$imagepolicy\": \"fleet:agent\"}\n",
	"clusters/prod/app.yaml":   "image: ghcr.io/acme/app:2.0.0 # {\"$imagepolicy\": \"fleet:app\"}\n",
	"clusters/prod/web.yaml":   "image: ghcr.io/acme/web:1.0.0@" + digestA + " # {\"$imagepolicy\": \"fleet:web\"}\n",
	"clusters/prod/values.yaml": "chart:\n  tag: 3.7.0 # {\"$imagepolicy\": \"fleet:chart:tag\"}\n" +
		"  digest: " + digestA + " # {\"$imagepolicy\": \"fleet:chart:digest\"}\n",
	"clusters/prod/kms.yaml": "image: ghcr.io/acme/kms:2.1.3 # {\"$imagepolicy\": \"kms\"}\n",
	"README.md":              "# fleet\n",
}

// fleetRefs is the refs file of the plans: agent would go to 1.4.2 (which
// the history holds), app down to 1.9.0, web and chart up, kms unchanged.
const fleetRefs = `
fleet/agent: {name: ghcr.io/acme/agent, tag: 1.4.2, digest: ` + digestB + `}
fleet/app:
  name: ghcr.io/acme/app
  tag: 1.9.0
  policy: {semver: {range: ">=1.0.0"}}
fleet/web: {name: ghcr.io/acme/web, tag: 1.1.0, digest: ` + digestB + `}
fleet/chart: {name: ghcr.io/acme/charts/app, tag: 3.7.1, digest: ` + digestC + `}
fleet/kms: {name: ghcr.io/acme/kms, tag: 2.1.3}
`

// newFleet makes a Git repository holding fleetFiles, with an automation
// commit moving agent to 1.4.2 and its revert; it returns the directory
// and the revert's SHA.
func newFleet(t *testing.T) (dir, revert string) {
	t.Helper()
	dir = t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	commit(t, dir, "Add fleet", fleetFiles)
	updated := fleetFiles["clusters/prod/agent.yaml"]
	updated = updated[:len(updated)-len("1.4.1 # {\"$imagepolicy\": \"fleet:agent\"}\n")] + "1.4.2@" + digestB + " # {\"$imagepolicy\": \"fleet:agent\"}\n"
	commit(t, dir, "Update agent to 1.4.2\n\n"+guard.FormatUpdateTrailer(guard.Update{Policy: "fleet/agent", Old: "1.4.1", New: "1.4.2"}),
		map[string]string{"clusters/prod/agent.yaml": updated})
	git(t, dir, "revert", "--no-edit", "HEAD")
	return dir, git(t, dir, "rev-parse", "HEAD")
}

func TestComputeFleet(t *testing.T) {
	dir, revert := newFleet(t)
	policies, err := plan.ParseRefs([]byte(fleetRefs))
	if err != nil {
		t.Fatal(err)
	}
	holds, branch, err := plan.ReadHolds(dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if branch != "main" {
		t.Fatalf("branch = %q, want main", branch)
	}
	held := fmt.Sprintf("held: fleet/agent 1.4.2 (reverted in %s)", revert[:10])

	cases := []struct {
		name     string
		path     string
		mutate   func(in *plan.Input)
		want     []string
		wantCode int
	}{
		{
			name: "changes, holds and downgrades",
			path: "./clusters",
			want: []string{
				"clusters/prod/values.yaml: ghcr.io/acme/charts/app 3.7.0 --> 3.7.1 (" + digestC + ")",
				"clusters/prod/web.yaml: ghcr.io/acme/web 1.0.0 --> 1.1.0 (" + digestB + ")",
				held,
				"refused: clusters/prod/agent.yaml: fleet/agent 1.4.1 --> 1.4.2 (held)",
				"refused: clusters/prod/app.yaml: fleet/app 2.0.0 --> 1.9.0 (downgrade)",
			},
			wantCode: plan.ExitChanges,
		},
		{
			name:   "downgrades allowed",
			path:   "clusters/prod",
			mutate: func(in *plan.Input) { in.AllowDowngrade = true },
			want: []string{
				"clusters/prod/app.yaml: ghcr.io/acme/app 2.0.0 --> 1.9.0",
				"clusters/prod/values.yaml: ghcr.io/acme/charts/app 3.7.0 --> 3.7.1 (" + digestC + ")",
				"clusters/prod/web.yaml: ghcr.io/acme/web 1.0.0 --> 1.1.0 (" + digestB + ")",
				held,
				"refused: clusters/prod/agent.yaml: fleet/agent 1.4.1 --> 1.4.2 (held)",
			},
			wantCode: plan.ExitChanges,
		},
		{
			name: "only held and refused: nothing changes",
			path: "clusters",
			mutate: func(in *plan.Input) {
				delete(in.Policies, key("fleet", "web"))
				delete(in.Policies, key("fleet", "chart"))
			},
			want: []string{
				held,
				"refused: clusters/prod/agent.yaml: fleet/agent 1.4.1 --> 1.4.2 (held)",
				"refused: clusters/prod/app.yaml: fleet/app 2.0.0 --> 1.9.0 (downgrade)",
			},
			wantCode: plan.ExitNoChange,
		},
		{
			name: "a hold ends when the policy moves on",
			path: "clusters",
			mutate: func(in *plan.Input) {
				in.Policies = map[update.PolicyKey]guard.Policy{key("fleet", "agent"): {Ref: ref("ghcr.io/acme/agent", "1.4.3", "")}}
			},
			want:     []string{"clusters/prod/agent.yaml: ghcr.io/acme/agent 1.4.1 --> 1.4.3"},
			wantCode: plan.ExitChanges,
		},
		{
			name: "a digest-only change",
			path: "clusters",
			mutate: func(in *plan.Input) {
				in.Policies = map[update.PolicyKey]guard.Policy{key("fleet", "web"): {Ref: ref("ghcr.io/acme/web", "1.0.0", digestC)}}
			},
			want:     []string{"clusters/prod/web.yaml: ghcr.io/acme/web 1.0.0@" + digestA + " --> 1.0.0@" + digestC},
			wantCode: plan.ExitChanges,
		},
		{
			name: "markers without a namespace use the default one",
			path: "clusters",
			mutate: func(in *plan.Input) {
				in.DefaultNamespace = "fleet"
				in.Policies = map[update.PolicyKey]guard.Policy{key("fleet", "kms"): {Ref: ref("ghcr.io/acme/kms", "2.2.0", "")}}
			},
			want:     []string{"clusters/prod/kms.yaml: ghcr.io/acme/kms 2.1.3 --> 2.2.0"},
			wantCode: plan.ExitChanges,
		},
		{
			name:     "nothing selected",
			path:     "clusters",
			mutate:   func(in *plan.Input) { in.Policies = nil },
			wantCode: plan.ExitNoChange,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			before := readTree(t, dir)
			in := plan.Input{Root: dir, Path: tc.path, DefaultNamespace: "elsewhere", Input: guard.Input{Policies: clone(policies), Holds: holds}}
			if tc.mutate != nil {
				tc.mutate(&in)
			}
			p, err := plan.Compute(context.Background(), in)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Lines()).To(Equal(tc.want))
			g.Expect(p.ExitCode()).To(Equal(tc.wantCode))
			g.Expect(readTree(t, dir)).To(Equal(before), "a plan writes nothing")
		})
	}
}

func TestComputeFileErrors(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"clusters/bad.yaml":  "image: ghcr.io/acme/agent:1.4.1 # {\"$imagepolicy\": \"a:b:c:d\"}\n",
		"clusters/good.yaml": "image: ghcr.io/acme/agent:1.4.1 # {\"$imagepolicy\": \"fleet:agent\"}\n",
	})
	p, err := plan.Compute(context.Background(), plan.Input{Root: dir, Path: "clusters", Input: guard.Input{Policies: map[update.PolicyKey]guard.Policy{
		key("fleet", "agent"): {Ref: ref("ghcr.io/acme/agent", "1.4.2", "")},
	}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Lines()).To(Equal([]string{"clusters/good.yaml: ghcr.io/acme/agent 1.4.1 --> 1.4.2"}))
	g.Expect(p.Result.FileErrors).To(HaveLen(1))
	g.Expect(p.ExitCode()).To(Equal(plan.ExitError))

	_, err = plan.Compute(context.Background(), plan.Input{Root: dir, Path: "../elsewhere"})
	g.Expect(err).To(HaveOccurred())
}

func TestReadHolds(t *testing.T) {
	t.Run("not a repository", func(t *testing.T) {
		g := NewWithT(t)
		holds, branch, err := plan.ReadHolds(t.TempDir(), "", "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(holds).To(BeEmpty())
		g.Expect(branch).To(BeEmpty())
	})
	t.Run("detached HEAD", func(t *testing.T) {
		g := NewWithT(t)
		dir, revert := newFleet(t)
		git(t, dir, "checkout", "-q", "--detach", "HEAD")
		holds, branch, err := plan.ReadHolds(dir, "", "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(branch).To(Equal("HEAD"))
		g.Expect(holds).To(Equal([]guard.Hold{{Policy: "fleet/agent", Version: "1.4.2", RevertedIn: revert}}))
	})
	t.Run("the local branch wins over its remote-tracking branch", func(t *testing.T) {
		g := NewWithT(t)
		upstream, _ := newFleet(t)
		git(t, upstream, "reset", "-q", "--hard", "HEAD~1") // the revert is not upstream
		dir := filepath.Join(t.TempDir(), "checkout")
		git(t, filepath.Dir(dir), "clone", "-q", upstream, dir)
		holds, _, err := plan.ReadHolds(dir, "main", "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(holds).To(BeEmpty())
		git(t, dir, "revert", "--no-edit", "HEAD")
		revert := git(t, dir, "rev-parse", "HEAD")
		holds, _, err = plan.ReadHolds(dir, "main", "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(holds).To(Equal([]guard.Hold{{Policy: "fleet/agent", Version: "1.4.2", RevertedIn: revert}}))
	})
	t.Run("a revert on the push branch, local or origin's", func(t *testing.T) {
		g := NewWithT(t)
		upstream, _ := newFleet(t)
		git(t, upstream, "reset", "-q", "--hard", "HEAD~1") // the revert is not on main
		git(t, upstream, "checkout", "-q", "-b", "uprev/review")
		git(t, upstream, "revert", "--no-edit", "HEAD")
		revert := git(t, upstream, "rev-parse", "HEAD")
		git(t, upstream, "checkout", "-q", "main")
		want := []guard.Hold{{Policy: "fleet/agent", Version: "1.4.2", RevertedIn: revert}}

		holds, branch, err := plan.ReadHolds(upstream, "", "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(branch).To(Equal("main"))
		g.Expect(holds).To(BeEmpty())
		holds, _, err = plan.ReadHolds(upstream, "", "uprev/review")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(holds).To(Equal(want))

		// A clone has the push branch as origin/uprev/review only.
		dir := filepath.Join(t.TempDir(), "checkout")
		git(t, filepath.Dir(dir), "clone", "-q", upstream, dir)
		holds, _, err = plan.ReadHolds(dir, "", "uprev/review")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(holds).To(Equal(want))

		// A push branch not created yet holds nothing.
		holds, _, err = plan.ReadHolds(dir, "", "uprev/next")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(holds).To(BeEmpty())
	})
	t.Run("an unknown branch", func(t *testing.T) {
		g := NewWithT(t)
		dir, _ := newFleet(t)
		_, _, err := plan.ReadHolds(dir, "nope", "")
		g.Expect(err).To(MatchError(ContainSubstring(`branch "nope"`)))
	})
}

func TestReadRefsFile(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "refs.json")
	g.Expect(os.WriteFile(path, []byte(`{"fleet/agent": {"name": "ghcr.io/acme/agent", "tag": "1.4.2", "digest": "`+digestA+`",
		"policy": {"numerical": {"order": "asc"}}, "filterTags": {"pattern": "^(?P<n>[0-9]+)$", "extract": "$n"}}}`), 0o644)).To(Succeed())
	policies, err := plan.ReadRefsFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	p := policies[key("fleet", "agent")]
	g.Expect(p.Ref).To(Equal(ref("ghcr.io/acme/agent", "1.4.2", digestA)))
	g.Expect(p.Ordering.Policy.Numerical).NotTo(BeNil())
	g.Expect(p.Ordering.FilterTags.Extract).To(Equal("$n"))

	_, err = plan.ReadRefsFile(filepath.Join(t.TempDir(), "missing.yaml"))
	g.Expect(err).To(HaveOccurred())
}

func TestParseRefsErrors(t *testing.T) {
	for name, data := range map[string]string{
		"not a mapping":    "- a\n- b\n",
		"unknown field":    "fleet/agent: {name: a, tag: '1', tags: x}\n",
		"no namespace":     "agent: {name: a, tag: '1'}\n",
		"too many slashes": "fleet/agent/x: {name: a, tag: '1'}\n",
		"no tag":           "fleet/agent: {name: a}\n",
		"bad range":        "fleet/agent: {name: a, tag: '1', policy: {semver: {range: '>>1'}}}\n",
		"two policies":     "fleet/agent: {name: a, tag: '1', policy: {semver: {range: '>=1'}, alphabetical: {}}}\n",
		"bad pattern":      "fleet/agent: {name: a, tag: '1', filterTags: {pattern: '('}}\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := plan.ParseRefs([]byte(data))
			NewWithT(t).Expect(err).To(MatchError(plan.ErrInvalidRefs))
		})
	}
}

func key(ns, name string) update.PolicyKey { return update.PolicyKey{Namespace: ns, Name: name} }

func ref(image, tag, digest string) update.Ref {
	return update.Ref{Image: image, Tag: tag, Digest: digest}
}

func clone(m map[update.PolicyKey]guard.Policy) map[update.PolicyKey]guard.Policy {
	out := make(map[update.PolicyKey]guard.Policy, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
