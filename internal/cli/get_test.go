package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// TestGetTables shows each noun's table, plain and wide, for the objects
// of createFleet.
func TestGetTables(t *testing.T) {
	ns := newNamespace(t)
	createFleet(t, ns)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{
			args: []string{"get", "policies"},
			want: table(
				"NAME    LATEST                     READY   STATUS                                                      AGE",
				"agent   ghcr.io/acme/agent:1.4.2   True    Latest image tag for ghcr.io/acme/agent resolved to 1.4.2   3d",
				"kms                                False   no tag matches >=2.0.0                                      3d",
			),
		},
		{
			args: []string{"get", "imagepolicy", "-o", "wide"},
			want: table(
				"NAME    LATEST                     READY   STATUS                                                      AGE   REPOSITORY   DIGEST",
				"agent   ghcr.io/acme/agent:1.4.2   True    Latest image tag for ghcr.io/acme/agent resolved to 1.4.2   3d    agent        "+agentDigest,
				"kms                                False   no tag matches >=2.0.0                                      3d    images/kms",
			),
		},
		{
			args: []string{"get", "automations"},
			want: table(
				"NAME     READY     SUSPENDED   LAST COMMIT   HOLDS   STATUS                                AGE",
				"fleet    True      False       3f1c0d9a2b    2       pushed 3f1c0d9a2b: 1 change, 2 held   3d",
				"paused   Unknown   True                      0                                             3d",
			),
		},
		{
			args: []string{"get", "ua", "-o", "wide"},
			want: table(
				"NAME     READY     SUSPENDED   LAST COMMIT   HOLDS   STATUS                                AGE   URL                                 PUSH BRANCH     LAST PUSH",
				"fleet    True      False       3f1c0d9a2b    2       pushed 3f1c0d9a2b: 1 change, 2 held   3d    https://git.example.com/fleet.git   uprev/updates   5m",
				"paused   Unknown   True                      0                                             3d    https://git.example.com/fleet.git   main",
			),
		},
		{
			args: []string{"get", "syncs"},
			want: table(
				"NAME      READY     SUSPENDED   REVISION               APPLIED   STATUS                           AGE",
				"prod      False     False       main@sha1:c0ffee0000   2/3       wave 2 (us-1) waits for wave 1   3d",
				"staging   Unknown   True                               -                                          3d",
			),
		},
		{
			args: []string{"get", "sync", "-o", "wide"},
			want: table(
				"NAME      READY     SUSPENDED   REVISION               APPLIED   STATUS                           AGE   URL                                 PATH                 STEPS     TARGETS",
				"prod      False     False       main@sha1:c0ffee0000   2/3       wave 2 (us-1) waits for wave 1   3d    https://git.example.com/fleet.git   ./clusters/prod      2/2 0/1   local,eu-1,us-1",
				"staging   Unknown   True                               -                                          3d    https://git.example.com/fleet.git   ./clusters/staging             local",
			),
		},
		{
			args: []string{"get", "holds"},
			want: table(
				"AUTOMATION    KIND                    "+policyColumn(ns, "POLICY")+"VERSION   REVERTED IN   RELEASED   REASON",
				"fleet         UpdateAutomation        "+policyColumn(ns, ns+"/agent")+"1.4.2     9ab2c3d4e5    False      (reverted)",
				"fleet         UpdateAutomation        "+policyColumn(ns, ns+"/app")+"2.1.0     1234567890    True       (reverted)",
				"flux-system   ImageUpdateAutomation   "+policyColumn(ns, ns+"/web")+"3.0.0     fedcba9876    False      (reverted)",
			),
		},
		{
			args: []string{"get", "syncs", "prod"},
			want: table(
				"NAME   READY   SUSPENDED   REVISION               APPLIED   STATUS                           AGE",
				"prod   False   False       main@sha1:c0ffee0000   2/3       wave 2 (us-1) waits for wave 1   3d",
			),
		},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			g := NewWithT(t)
			r := uprev(t, append(tc.args, "-n", ns, kubeconfigFlag)...)
			g.Expect(r).To(Equal(result{stdout: tc.want}))
		})
	}
}

// TestGetAllNamespaces shows -A: a NAMESPACE column first, and the rows of
// every namespace.
func TestGetAllNamespaces(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	other := createNamespace(t, ns+"-other")
	createWithStatus(t, newSync(ns, "prod", "local"))
	createWithStatus(t, newSync(other, "prod", "local"))

	r := uprev(t, "get", "syncs", "-A", kubeconfigFlag)
	g.Expect(r.code).To(Equal(0), r.stderr)
	lines := strings.Split(r.stdout, "\n")
	g.Expect(lines[0]).To(MatchRegexp(`^NAMESPACE +NAME +READY +SUSPENDED +REVISION +APPLIED +STATUS +AGE$`))
	g.Expect(lines).To(ContainElement(MatchRegexp(`^` + ns + ` +prod +Unknown +False +- +3d$`)))
	g.Expect(lines).To(ContainElement(MatchRegexp(`^` + other + ` +prod +Unknown +False +- +3d$`)))
}

// TestGetObjects shows -o yaml and -o json: a List of the objects, with
// their apiVersion and kind, or the object alone when one is named; holds
// as records.
func TestGetObjects(t *testing.T) {
	ns := newNamespace(t)
	createFleet(t, ns)

	t.Run("yaml list", func(t *testing.T) {
		g := NewWithT(t)
		r := uprev(t, "get", "automations", "-n", ns, "-o", "yaml", kubeconfigFlag)
		g.Expect(r.code).To(Equal(0), r.stderr)
		var list struct {
			APIVersion, Kind string
			Metadata         map[string]string
			Items            []uprevv1.UpdateAutomation
		}
		g.Expect(yaml.UnmarshalStrict([]byte(r.stdout), &list, yaml.DisallowUnknownFields)).To(Succeed())
		g.Expect(list.APIVersion).To(Equal("v1"))
		g.Expect(list.Kind).To(Equal("List"))
		g.Expect(list.Items).To(HaveLen(2))
		fleet := list.Items[0]
		g.Expect(fleet.APIVersion).To(Equal("uprev.dev/v1alpha1"))
		g.Expect(fleet.Kind).To(Equal("UpdateAutomation"))
		g.Expect(fleet.Name).To(Equal("fleet"))
		g.Expect(fleet.Status.LastPushCommit).To(Equal(pushCommit))
		g.Expect(fleet.ManagedFields).To(BeEmpty())
		g.Expect(r.stdout).NotTo(ContainSubstring("managedFields"))
	})

	t.Run("json of one object", func(t *testing.T) {
		g := NewWithT(t)
		r := uprev(t, "get", "sync", "prod", "-n", ns, "-o", "json", kubeconfigFlag)
		g.Expect(r.code).To(Equal(0), r.stderr)
		g.Expect(r.stdout).To(HavePrefix("{\n    \"apiVersion\": \"uprev.dev/v1alpha1\",\n    \"kind\": \"Sync\",\n"))
		var s uprevv1.Sync
		g.Expect(json.Unmarshal([]byte(r.stdout), &s)).To(Succeed())
		g.Expect(s.Name).To(Equal("prod"))
		g.Expect(s.Status.LastAttemptedRevision).To(Equal(syncRevision))
	})

	t.Run("holds", func(t *testing.T) {
		g := NewWithT(t)
		r := uprev(t, "get", "holds", "fleet", "-n", ns, "-o", "yaml", kubeconfigFlag)
		g.Expect(r).To(Equal(result{stdout: strings.ReplaceAll(`apiVersion: v1
items:
- automation: fleet
  automationKind: UpdateAutomation
  namespace: NS
  policy: NS/agent
  released: false
  revertedIn: `+agentRevert+`
  version: 1.4.2
- automation: fleet
  automationKind: UpdateAutomation
  namespace: NS
  policy: NS/app
  released: true
  revertedIn: `+appRevert+`
  version: 2.1.0
kind: List
metadata:
  resourceVersion: ""
`, "NS", ns)}))
	})

	t.Run("an empty list", func(t *testing.T) {
		g := NewWithT(t)
		r := uprev(t, "get", "holds", "paused", "-n", ns, "-o", "json", kubeconfigFlag)
		g.Expect(r).To(Equal(result{stdout: "{\n    \"apiVersion\": \"v1\",\n    \"items\": [],\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n"}))
	})
}

// TestGetNothing shows what get says when there is nothing to list, or an
// object named is missing.
func TestGetNothing(t *testing.T) {
	ns := newNamespace(t)
	createWithStatus(t, newSync(ns, "prod", "local"))
	for _, tc := range []struct {
		args []string
		want result
	}{
		{[]string{"get", "policies", "-n", ns}, result{stderr: "No policies found in namespace " + ns + ".\n"}},
		{[]string{"get", "holds", "-n", ns}, result{stderr: "No holds found in namespace " + ns + ".\n"}},
		{[]string{"get", "syncs", "prod", "nope", "-n", ns}, result{stderr: `uprev get syncs: Sync "nope" not found in namespace "` + ns + "\"\n", code: 1}},
		{[]string{"get", "holds", "nope", "-n", ns}, result{stderr: `uprev get holds: UpdateAutomation "nope" not found in namespace "` + ns + "\" (nor an ImageUpdateAutomation)\n", code: 1}},
		{[]string{"get", "automations", "-n", "no-such-namespace"}, result{stderr: "No automations found in namespace no-such-namespace.\n"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			NewWithT(t).Expect(uprev(t, append(tc.args, kubeconfigFlag)...)).To(Equal(tc.want))
		})
	}
}

// TestGetGates shows ReleaseGates: the count of policies and waiting
// versions; wide the minimum age, the promotion (Sync, targets,
// healthyFor) and each policy's first waiting version with the time it
// still waits, by the commands' clock; yaml the object.
func TestGetGates(t *testing.T) {
	ns := newNamespace(t)
	eligible := metav1.NewTime(now.Add(52*time.Hour + 20*time.Second))
	later := metav1.NewTime(now.Add(70 * time.Hour))
	createWithStatus(t, &uprevv1.ReleaseGate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
		Spec: uprevv1.ReleaseGateSpec{MinReleaseAge: "72h",
			Promotion: &uprevv1.Promotion{Sync: "staging", Targets: []string{"eu-staging", "us-staging"}, HealthyFor: "24h"}},
		Status: uprevv1.ReleaseGateStatus{
			Conditions: []metav1.Condition{ready(metav1.ConditionTrue, "Succeeded", "2 versions wait")},
			Policies: []uprevv1.GatedPolicy{
				{Name: "agent", Latest: &uprevv1.GatedVersion{Tag: "1.4.2"}, Waiting: []uprevv1.WaitingVersion{
					{Tag: "1.5.1", Gate: "minReleaseAge", EligibleAt: &eligible},
					{Tag: "1.5.0", Gate: "minReleaseAge", EligibleAt: &later},
				}},
				{Name: "kms", Latest: &uprevv1.GatedVersion{Tag: "2.0.0"}},
			},
		},
	})
	createWithStatus(t, &uprevv1.ReleaseGate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "staging"},
		Spec: uprevv1.ReleaseGateSpec{Promotion: &uprevv1.Promotion{Sync: "dev"}}})
	createWithStatus(t, &uprevv1.ReleaseGate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "young"},
		Spec: uprevv1.ReleaseGateSpec{MinReleaseAge: "1h"}})

	for _, tc := range []struct {
		args []string
		want string
	}{
		{
			args: []string{"get", "gates"},
			want: table(
				"NAME      POLICIES   WAITING   READY     STATUS            AGE",
				"prod      2          2         True      2 versions wait   3d",
				"staging   0          0         Unknown                     3d",
				"young     0          0         Unknown                     3d",
			),
		},
		{
			args: []string{"get", "releasegate", "-o", "wide"},
			want: table(
				"NAME      POLICIES   WAITING   READY     STATUS            AGE   MIN-AGE   PROMOTION                                NEXT",
				"prod      2          2         True      2 versions wait   3d    72h       staging: eu-staging,us-staging for 24h   agent: 1.5.1 (age, 2d 4h)",
				"staging   0          0         Unknown                     3d              dev: all targets",
				"young     0          0         Unknown                     3d    1h",
			),
		},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			g := NewWithT(t)
			r := uprev(t, append(tc.args, "-n", ns, kubeconfigFlag)...)
			g.Expect(r).To(Equal(result{stdout: tc.want}))
		})
	}

	t.Run("all namespaces", func(t *testing.T) {
		g := NewWithT(t)
		r := uprev(t, "get", "gate", "-A", kubeconfigFlag)
		g.Expect(r.code).To(Equal(0), r.stderr)
		lines := strings.Split(r.stdout, "\n")
		g.Expect(lines[0]).To(MatchRegexp(`^NAMESPACE +NAME +POLICIES +WAITING +READY +STATUS +AGE$`))
		g.Expect(lines).To(ContainElement(MatchRegexp(`^` + ns + ` +prod +2 +2 +True +2 versions wait +3d$`)))
	})

	t.Run("yaml of one gate", func(t *testing.T) {
		g := NewWithT(t)
		r := uprev(t, "get", "gates", "prod", "-n", ns, "-o", "yaml", kubeconfigFlag)
		g.Expect(r.code).To(Equal(0), r.stderr)
		var rg uprevv1.ReleaseGate
		g.Expect(yaml.UnmarshalStrict([]byte(r.stdout), &rg)).To(Succeed())
		g.Expect(rg.APIVersion).To(Equal("uprev.dev/v1alpha1"))
		g.Expect(rg.Kind).To(Equal("ReleaseGate"))
		g.Expect(rg.Status.Policies).To(HaveLen(2))
		g.Expect(rg.Status.Policies[0].Waiting[0].Tag).To(Equal("1.5.1"))
		g.Expect(r.stdout).NotTo(ContainSubstring("managedFields"))
	})

	t.Run("nothing", func(t *testing.T) {
		NewWithT(t).Expect(uprev(t, "get", "gates", "-n", "no-such-namespace", kubeconfigFlag)).
			To(Equal(result{stderr: "No gates found in namespace no-such-namespace.\n"}))
	})
}

// TestGetSelectorNamesNoHeaders shows -l, -o name and --no-headers.
func TestGetSelectorNamesNoHeaders(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	createFleet(t, ns)
	prod := &uprevv1.Sync{}
	prod.Namespace, prod.Name = ns, "prod"
	get(t, prod)
	prod.Labels = map[string]string{"team": "platform"}
	g.Expect(k8s.Update(t.Context(), prod)).To(Succeed())

	r := uprev(t, "get", "syncs", "-l", "team=platform", "-n", ns, kubeconfigFlag)
	g.Expect(r.code).To(Equal(0), r.stderr)
	g.Expect(r.stdout).To(MatchRegexp(`^NAME +READY .*\nprod +False .*\n$`))
	r = uprev(t, "get", "syncs", "-l", "team=platform", "-o", "name", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{stdout: "sync.uprev.dev/prod\n"}))
	r = uprev(t, "get", "syncs", "-l", "team!=platform", "-o", "name", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{stdout: "sync.uprev.dev/staging\n"}))
	r = uprev(t, "get", "policies", "-o", "name", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{stdout: "imagepolicy.image.toolkit.fluxcd.io/agent\nimagepolicy.image.toolkit.fluxcd.io/kms\n"}))
	r = uprev(t, "get", "syncs", "-l", "team=nobody", "-n", ns, kubeconfigFlag)
	g.Expect(r).To(Equal(result{stderr: "No syncs found in namespace " + ns + ".\n"}))

	r = uprev(t, "get", "syncs", "--no-headers", "-n", ns, kubeconfigFlag)
	g.Expect(r.code).To(Equal(0), r.stderr)
	g.Expect(r.stdout).To(MatchRegexp(`^prod +False .*\nstaging +\S+ +True .*\n$`))

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "holds", "-o", "name"}, "uprev get holds: -o name prints objects, and these rows are none; use -o yaml or -o json\n"},
		{[]string{"get", "syncs", "prod", "-l", "team=platform"}, "uprev get syncs: names cannot be given with a selector (-l)\n"},
		{[]string{"get", "syncs", "-l", "team in (a"}, `uprev get syncs: parsing the selector "team in (a": `},
		{[]string{"get", "fleet", "--watch"}, "uprev get fleet: the fleet view takes -n, -A and -o wide, yaml or json only"},
	} {
		r := uprev(t, append(tc.args, "-n", ns, kubeconfigFlag)...)
		g.Expect(r.code).To(Equal(1), strings.Join(tc.args, " "))
		g.Expect(r.stderr).To(HavePrefix(tc.want), strings.Join(tc.args, " "))
	}
}
