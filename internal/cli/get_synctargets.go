package cli

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// syncTargetsNoun lists SyncTargets, the records a Sync keeps of each of
// its targets: the revision applied there, whether it is healthy and
// since when; wide shows the record's name, the revision last tried, when
// it was applied and why a target waits. `-l uprev.dev/sync=<sync>` lists
// those of one Sync.
func syncTargetsNoun() Noun {
	return Noun{
		Name:    "synctargets",
		Aliases: []string{"synctarget", "targets", "target"},
		Short:   "List SyncTargets: the revision each target of a Sync applied and its health",
		Watches: func() client.ObjectList { return &uprevv1.SyncTargetList{} },
		Read: func(ctx context.Context, c client.Reader, q Query) (*Table, error) {
			var list uprevv1.SyncTargetList
			targets, err := readObjects[uprevv1.SyncTarget](ctx, c, uprevv1.GroupVersion.WithKind(uprevv1.SyncTargetKind), &list, &list.Items, q)
			if err != nil {
				return nil, err
			}
			t := &Table{Columns: []Column{
				{Header: "SYNC"}, {Header: "TARGET"}, {Header: "REVISION"}, {Header: "HEALTHY"}, {Header: "HEALTHY SINCE"}, {Header: "STATUS"}, {Header: "AGE"},
				{Header: "NAME", Wide: true}, {Header: "ATTEMPTED", Wide: true}, {Header: "APPLIED", Wide: true}, {Header: "REASON", Wide: true},
			}}
			for _, st := range targets {
				s := st.Status
				t.Rows = append(t.Rows, Row{Namespace: st.Namespace, Object: st, Cells: []string{
					st.Spec.Sync, st.Spec.Target, shortRevision(s.LastAppliedRevision), boolCell(s.Healthy), ageOf(s.HealthySince, q.Now),
					s.Message, age(st.CreationTimestamp, q.Now),
					st.Name, shortRevision(s.LastAttemptedRevision), ageOf(s.LastAppliedTime, q.Now), s.Reason,
				}})
			}
			return t, nil
		},
	}
}
