package cli

import (
	"context"
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
	"github.com/uprev-dev/uprev/internal/sourcekind"
)

// sourcesNoun lists ReleaseSources: where each reads versions, the version
// selected and how many assets are pinned; wide shows the URL read
// (redacted) and the pinned assets' hashes.
func sourcesNoun() Noun {
	return Noun{
		Name:    "sources",
		Aliases: []string{"source", "releasesources", "releasesource"},
		Short:   "List ReleaseSources and the version each selects",
		Watches: func() client.ObjectList { return &uprevv1.ReleaseSourceList{} },
		Read: func(ctx context.Context, c client.Reader, q Query) (*Table, error) {
			var list uprevv1.ReleaseSourceList
			sources, err := readObjects[uprevv1.ReleaseSource](ctx, c, uprevv1.GroupVersion.WithKind(uprevv1.ReleaseSourceKind), &list, &list.Items, q)
			if err != nil {
				return nil, err
			}
			t := &Table{Columns: []Column{
				{Header: "NAME"}, {Header: "KIND"}, {Header: "LATEST"}, {Header: "ASSETS"}, {Header: "READY"}, {Header: "STATUS"}, {Header: "AGE"},
				{Header: "FROM", Wide: true}, {Header: "PINNED", Wide: true},
			}}
			for _, rs := range sources {
				ready, message := readyCells(rs.Status.Conditions)
				kind, from := sourceKindCells(rs.Spec)
				var latest, assets, pinned string
				if l := rs.Status.Latest; l != nil {
					latest = l.Version
					assets = strconv.Itoa(len(l.Assets))
					for i, a := range l.Assets {
						if i > 0 {
							pinned += ", "
						}
						pinned += a.Name + "=" + shortDigest(a.SHA256)
					}
				}
				t.Rows = append(t.Rows, Row{Namespace: rs.Namespace, Object: rs, Cells: []string{
					rs.Name, kind, latest, assets, ready, message, age(rs.CreationTimestamp, q.Now),
					from, pinned,
				}})
			}
			return t, nil
		},
	}
}

// sourceKindCells names a source's kind, and what it reads (the chart and
// repository, the GitHub repository, the Git or feed URL), URLs redacted;
// empty for a spec of no kind.
func sourceKindCells(spec uprevv1.ReleaseSourceSpec) (kind, from string) {
	k, err := sourcekind.Of(spec)
	if err != nil {
		return "", ""
	}
	return k.Short(), k.From()
}

// shortDigest shortens sha256:<hex> to its first 12 hex digits.
func shortDigest(d string) string {
	const prefix = "sha256:"
	if len(d) > len(prefix)+12 {
		return d[:len(prefix)+12]
	}
	return d
}
