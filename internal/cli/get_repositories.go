package cli

import (
	"context"
	"strconv"
	"strings"

	imagev1 "github.com/fluxcd/image-reflector-controller/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// repositoriesNoun lists Flux ImageRepositories: the image each scans,
// when it last did and how many tags it found; wide shows the scan
// interval, whether it is suspended and the newest tags found.
func repositoriesNoun() Noun {
	return Noun{
		Name:    "repositories",
		Aliases: []string{"repository", "repo", "repos", "imagerepositories", "imagerepository"},
		Short:   "List ImageRepositories, their last scan and how many tags it found",
		Watches: func() client.ObjectList { return &imagev1.ImageRepositoryList{} },
		Read: func(ctx context.Context, c client.Reader, q Query) (*Table, error) {
			var list imagev1.ImageRepositoryList
			repos, err := readObjects[imagev1.ImageRepository](ctx, c, imagev1.GroupVersion.WithKind(imagev1.ImageRepositoryKind), &list, &list.Items, q)
			if err != nil {
				return nil, err
			}
			t := &Table{Columns: []Column{
				{Header: "NAME"}, {Header: "IMAGE"}, {Header: "TAGS"}, {Header: "LAST SCAN"}, {Header: "READY"}, {Header: "STATUS"}, {Header: "AGE"},
				{Header: "INTERVAL", Wide: true}, {Header: "SUSPENDED", Wide: true}, {Header: "LATEST TAGS", Wide: true},
			}}
			for _, r := range repos {
				ready, message := readyCells(r.Status.Conditions)
				var tags, scanned, latest string
				if scan := r.Status.LastScanResult; scan != nil {
					tags = strconv.Itoa(scan.TagCount)
					if !scan.ScanTime.IsZero() {
						scanned = age(scan.ScanTime, q.Now)
					}
					latest = strings.Join(scan.LatestTags, ",")
				}
				t.Rows = append(t.Rows, Row{Namespace: r.Namespace, Object: r, Cells: []string{
					r.Name, r.Spec.Image, tags, scanned, ready, message, age(r.CreationTimestamp, q.Now),
					r.Spec.Interval.Duration.String(), boolCell(r.Spec.Suspend), latest,
				}})
			}
			return t, nil
		},
	}
}
