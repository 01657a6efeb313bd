// Package config holds uprev's kustomize bases (config/default and the
// overlays). kustomize reads only the files a kustomization names, so this
// file is no part of any build; it puts the bases `uprev install` and
// `make release` build into the binary.
package config

import "embed"

// FS holds config/default, config/multitenant and the bases they use
// (crd, rbac, manager), at the same paths as in the repository.
//
//go:embed crd default manager multitenant rbac
var FS embed.FS
