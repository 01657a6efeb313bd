// Package sharding runs several uprev managers on one cluster, each with
// Flux's --watch-label-selector for its shard, and shows that every object
// is reconciled by the manager of its shard alone.
package sharding

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/testenv/gitserver"
	"github.com/uprev-dev/uprev/internal/testenv/manager"
)

// shardKey is Flux's sharding label.
const shardKey = "sharding.fluxcd.io/key"

func TestShardsSplitTheObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := manager.StartCluster(t)
	bin := manager.Build(t)
	shards := map[string]*manager.Process{}
	for _, shard := range []string{"shard1", "shard2"} {
		// Leader election on, with the same controllers: the managers only
		// both run because each shard has a lease of its own.
		shards[shard] = manager.Start(t, bin, c.KubeConfigPath, t.TempDir(),
			"--controllers=sync", "--watch-label-selector="+shardKey+"="+shard,
			"--enable-leader-election", "--leader-election-namespace=default")
	}

	srv := gitserver.Start(t)
	url := srv.InitRepo(t, "fleet", "main", map[string]string{
		"app/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\ndata:\n  key: value\n",
	})
	newSync := func(name, shard string) *uprevv1.Sync {
		s := &uprevv1.Sync{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: uprevv1.SyncSpec{
				Interval: metav1.Duration{Duration: time.Hour},
				Git:      uprevv1.GitSource{URL: url, Ref: uprevv1.GitRef{Branch: "main"}},
				Path:     "./app",
				Targets:  []uprevv1.Target{{Name: "local"}},
			},
		}
		if shard != "" {
			s.Labels = map[string]string{shardKey: shard}
		}
		g.Expect(c.Client.Create(ctx, s)).To(Succeed())
		return s
	}
	owned := map[string][]string{"shard1": {"a-1", "a-2"}, "shard2": {"b-1", "b-2"}}
	var syncs []*uprevv1.Sync
	for shard, names := range owned {
		for _, name := range names {
			syncs = append(syncs, newSync(name, shard))
		}
	}
	unsharded := newSync("nobody", "")

	for _, s := range syncs {
		g.Eventually(func(g Gomega) {
			g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			g.Expect(conditions.IsReady(s)).To(BeTrue(), "%s: %s", s.Name, conditions.GetMessage(s, meta.ReadyCondition))
		}).WithTimeout(time.Minute).Should(Succeed())
	}
	// Each manager reconciled its own shard's Syncs and no other. A Sync is
	// Ready before its manager logs the end of that reconcile, so the log
	// lines of a manager's own Syncs are waited for; once they are there,
	// any reconcile of another shard's Sync, which started as early, would
	// be there too.
	reconciled := func(logs, name string) bool {
		return strings.Contains(logs, fmt.Sprintf(`"Sync":{"name":%q`, name))
	}
	for shard, p := range shards {
		g.Eventually(func(g Gomega) {
			logs := p.Logs(t)
			for _, name := range owned[shard] {
				g.Expect(reconciled(logs, name)).To(BeTrue(), "the manager of %s and its Sync %s", shard, name)
			}
		}).WithTimeout(time.Minute).Should(Succeed())
	}
	for shard, p := range shards {
		logs := p.Logs(t)
		for other, names := range owned {
			if other == shard {
				continue
			}
			for _, name := range names {
				g.Expect(reconciled(logs, name)).To(BeFalse(), "the manager of %s reconciled Sync %s of %s", shard, name, other)
			}
		}
		g.Expect(reconciled(logs, "nobody")).To(BeFalse(), "the manager of %s reconciled a Sync of no shard", shard)
	}
	// An object of no shard is reconciled by none.
	g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(unsharded), unsharded)).To(Succeed())
	g.Expect(unsharded.Status.Conditions).To(BeEmpty())
	g.Expect(unsharded.Finalizers).To(BeEmpty())

	// Two leases, one per shard, each held.
	var leases coordinationv1.LeaseList
	g.Expect(c.Client.List(ctx, &leases, client.InNamespace("default"))).To(Succeed())
	g.Expect(leases.Items).To(HaveLen(2))
	for _, l := range leases.Items {
		g.Expect(l.Name).To(HavePrefix("uprev-"))
		g.Expect(l.Spec.HolderIdentity).NotTo(BeNil())
	}
}
