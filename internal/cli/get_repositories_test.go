package cli

import (
	"strings"
	"testing"
	"time"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// createRepositoriesAndTargets creates in ns two ImageRepositories (one
// scanned, one never) and the SyncTargets of a Sync prod (one healthy for
// two hours, one that failed).
func createRepositoriesAndTargets(t *testing.T, ns string) {
	t.Helper()
	agent := &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec:       imagev1.ImageRepositorySpec{Image: "ghcr.io/acme/agent", Interval: metav1.Duration{Duration: 5 * time.Minute}},
		Status: imagev1.ImageRepositoryStatus{
			LastScanResult: &imagev1.ScanResult{TagCount: 42, ScanTime: metav1.NewTime(now.Add(-2 * time.Minute)), LatestTags: []string{"1.4.2", "1.4.1"}},
			Conditions:     []metav1.Condition{ready(metav1.ConditionTrue, meta.SucceededReason, "successful scan: found 42 tags")},
		},
	}
	createWithStatus(t, agent)
	kms := &imagev1.ImageRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kms"},
		Spec:       imagev1.ImageRepositorySpec{Image: "registry.example.com/kms", Interval: metav1.Duration{Duration: time.Hour}, Suspend: true},
	}
	createWithStatus(t, kms)

	since := metav1.NewTime(now.Add(-2 * time.Hour))
	applied := metav1.NewTime(now.Add(-3 * time.Hour))
	for _, st := range []*uprevv1.SyncTarget{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: uprevv1.SyncTargetName("prod", "eu-1"), Labels: map[string]string{uprevv1.SyncLabel: "prod"}},
			Spec:       uprevv1.SyncTargetSpec{Sync: "prod", Target: "eu-1"},
			Status: uprevv1.TargetStatus{Name: "eu-1", LastAppliedRevision: syncRevision, LastAttemptedRevision: syncRevision,
				LastAppliedTime: &applied, Healthy: true, HealthySince: &since},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: uprevv1.SyncTargetName("prod", "us-1"), Labels: map[string]string{uprevv1.SyncLabel: "prod"}},
			Spec:       uprevv1.SyncTargetSpec{Sync: "prod", Target: "us-1"},
			Status: uprevv1.TargetStatus{Name: "us-1", LastAppliedRevision: "main@sha1:" + oldCommit, LastAttemptedRevision: syncRevision,
				Message: "Deployment/agent: 0 of 2 replicas ready"},
		},
	} {
		createWithStatus(t, st)
	}
}

// TestGetRepositoriesAndSyncTargets shows the tables of ImageRepositories
// and SyncTargets, plain and wide, by their names and aliases.
func TestGetRepositoriesAndSyncTargets(t *testing.T) {
	ns := newNamespace(t)
	createRepositoriesAndTargets(t, ns)
	eu, us := uprevv1.SyncTargetName("prod", "eu-1"), uprevv1.SyncTargetName("prod", "us-1")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{
			args: []string{"get", "repositories"},
			want: table(
				"NAME    IMAGE                      TAGS   LAST SCAN   READY     STATUS                           AGE",
				"agent   ghcr.io/acme/agent         42     2m          True      successful scan: found 42 tags   3d",
				"kms     registry.example.com/kms                      Unknown                                    3d",
			),
		},
		{
			args: []string{"get", "imagerepository", "agent", "-o", "wide"},
			want: table(
				"NAME    IMAGE                TAGS   LAST SCAN   READY   STATUS                           AGE   INTERVAL   SUSPENDED   LATEST TAGS",
				"agent   ghcr.io/acme/agent   42     2m          True    successful scan: found 42 tags   3d    5m0s       False       1.4.2,1.4.1",
			),
		},
		{
			args: []string{"get", "repo", "kms", "-o", "name"},
			want: table("imagerepository.image.toolkit.fluxcd.io/kms"),
		},
		{
			args: []string{"get", "synctargets"},
			want: table(
				"SYNC   TARGET   REVISION               HEALTHY   HEALTHY SINCE   STATUS                                    AGE",
				"prod   eu-1     main@sha1:c0ffee0000   True      120m                                                      3d",
				"prod   us-1     main@sha1:0dd0000000   False                     Deployment/agent: 0 of 2 replicas ready   3d",
			),
		},
		{
			args: []string{"get", "targets", "-l", uprevv1.SyncLabel + "=prod", "-o", "wide", "--no-headers"},
			want: table(
				"prod   eu-1   main@sha1:c0ffee0000   True    120m                                             3d    "+eu+"   main@sha1:c0ffee0000   3h",
				"prod   us-1   main@sha1:0dd0000000   False          Deployment/agent: 0 of 2 replicas ready   3d    "+us+"   main@sha1:c0ffee0000",
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
