#!/usr/bin/env bash
# Builds Gitea (code.gitea.io/gitea) from the Go module proxy into the given
# directory (default: ../../bin), for the tests that open pull requests on a
# real Gitea (internal/testenv/gitea). Skips the build when the binary is
# already there.
#
# Output:
#   <dir>/gitea                  the server, SQLite built in (cgo)
#   <dir>/gitea-<version>/       its static root: options/ (locales, licences,
#                                gitignores), templates/ and public/, which a
#                                Gitea built without the `bindata` tag reads
#                                from disk; tests pass it as STATIC_ROOT_PATH.
# The static root is written before the binary, so a binary that is there has
# its files next to it.
#
# The module is copied to a writable directory because its go.mod has
# replace lines, which `go build pkg@version` refuses. SQLite is cgo
# (mattn/go-sqlite3): a C compiler is needed.
#
# Measured on 2 cores: 3m38s with the modules already downloaded and an
# empty build cache; 6m47s with empty module and build caches, on cores
# shared with another build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../bin}
version=v1.26.0
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -x "$out/gitea" ] && [ -d "$out/gitea-$version/options" ] && exit 0

echo "building gitea $version (about 4 minutes on 2 idle cores from a cold build cache, 7 with the module downloads)..." >&2
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
# Downloaded from outside any module, so that no go.mod is consulted or
# changed; the module cache holds it read-only.
src=$(cd "$work" && go mod download -json "code.gitea.io/gitea@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$src" ] || { echo "downloading gitea $version failed" >&2; exit 1; }
mkdir "$work/src"
cp -R "$src/." "$work/src"
chmod -R u+w "$work/src"

static="$out/gitea-$version"
rm -rf "$static.tmp"
mkdir -p "$static.tmp"
for d in options templates public; do
  if [ -d "$work/src/$d" ]; then cp -R "$work/src/$d" "$static.tmp/"; fi
done
chmod -R u+w "$static.tmp"
rm -rf "$static"
mv "$static.tmp" "$static"

cd "$work/src"
CGO_ENABLED=1 go build -trimpath -tags 'sqlite sqlite_unlock_notify' \
  -ldflags "-s -w -X main.Version=${version#v}" -o "$out/gitea.tmp" .
mv "$out/gitea.tmp" "$out/gitea"
