package cli

import (
	"context"
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/client"

	uprevv1 "github.com/uprev-dev/uprev/api/v1alpha1"
)

// sourcesNoun lists ReleaseSources: where each reads versions, the version
// selected and how many assets are pinned; wide shows the URL read and
// the pinned assets' hashes.
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

// sourceKindCells names a source's kind, and what it reads: the chart and
// repository, the GitHub repository, the Git or feed URL.
func sourceKindCells(spec uprevv1.ReleaseSourceSpec) (kind, from string) {
	switch {
	case spec.HelmRepository != nil:
		return "helm", spec.HelmRepository.Chart + " in " + spec.HelmRepository.URL
	case spec.GitHubReleases != nil:
		from = spec.GitHubReleases.Repository
		if spec.GitHubReleases.URL != "" {
			from += " at " + spec.GitHubReleases.URL
		}
		return "github", from
	case spec.GitTags != nil:
		return "git", spec.GitTags.URL
	case spec.HTTPJSON != nil:
		return "json", spec.HTTPJSON.URL + " " + spec.HTTPJSON.Versions
	default:
		return "", ""
	}
}

// shortDigest shortens sha256:<hex> to its first 12 hex digits.
func shortDigest(d string) string {
	const prefix = "sha256:"
	if len(d) > len(prefix)+12 {
		return d[:len(prefix)+12]
	}
	return d
}
