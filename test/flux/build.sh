#!/usr/bin/env bash
# Builds the Flux CLI (github.com/fluxcd/flux2/v2/cmd/flux) from the Go
# module proxy into the given directory (default: ../../bin), for the tests
# that run the real CLI against uprev (test/fluxcli). Skips the build when
# the binary is already there.
#
# cmd/flux embeds manifests/*.yaml, which flux2's own Makefile generates
# (manifests/scripts/bundle.sh, with kustomize and network access) and which
# are not in the module. Only `flux install` and `flux bootstrap` read them;
# the commands uprev's tests run (get, reconcile, suspend, resume) never do.
# So the module is copied to a writable directory, with its own go.mod,
# go.sum and replace lines, and given one placeholder manifest.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../bin}
version=v2.9.5
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -x "$out/flux" ] && exit 0

echo "building flux $version (3 to 5 minutes on 2 idle cores from cold build caches)..." >&2
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
# Downloaded from outside any module, so that no go.mod is consulted or
# changed; the module cache holds it read-only.
src=$(cd "$work" && go mod download -json "github.com/fluxcd/flux2/v2@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$src" ] || { echo "downloading flux2 $version failed" >&2; exit 1; }
cp -R "$src/." "$work"
chmod -R u+w "$work"
mkdir -p "$work/cmd/flux/manifests"
cat >"$work/cmd/flux/manifests/placeholder.yaml" <<'YAML'
# Placeholder: this flux was built for uprev's tests, without the bundled
# controller manifests. `flux install` and `flux bootstrap` do not work with it.
YAML
cd "$work"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.VERSION=${version#v}" -o "$out/flux.tmp" ./cmd/flux
mv "$out/flux.tmp" "$out/flux"
