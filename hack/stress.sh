#!/usr/bin/env bash
# stress runs the test packages a change touched with the race detector,
# three times, while a heavy package runs beside them: the load CI sees.
# A test that fails here is flaky; fix it at its cause before you stop.
#
#   hack/stress.sh [BASE]   packages changed since BASE (default: HEAD~1),
#                           with the working tree's uncommitted changes;
#                           BASE=all: every test package, the whole suite
#   LOAD=./test/install     the package run beside them (default ./controllers)
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-HEAD~1}
load=${LOAD:-./controllers}
changed() {
	if [[ $base == all ]]; then
		git ls-files -- '*_test.go'
	else
		git diff --name-only "$base" -- '*.go'
		git ls-files --others --exclude-standard -- '*.go'
	fi
}
mapfile -t nested < <(git ls-files -- '*/go.mod' | xargs -r -n1 dirname)
inNested() {
	local m
	for m in "${nested[@]}"; do
		if [[ $1 == "$m" || $1 == "$m"/* ]]; then return 0; fi
	done
	return 1
}
mapfile -t pkgs < <(
	changed |
		xargs -r -n1 dirname | sort -u |
		while read -r d; do
			# Packages with tests only, of this module (not test/controlplane's
			# or hack/lint's).
			if compgen -G "$d/*_test.go" >/dev/null && ! inNested "$d"; then echo "./$d"; fi
		done
)
if [[ ${#pkgs[@]} -eq 0 ]]; then
	echo "stress: no test package changed since $base"
	exit 0
fi
echo "stress: ${pkgs[*]} (-race -count=3), with $load beside them"
go test -race -count=1 -timeout 30m "$load" >/tmp/uprev-stress-load.log 2>&1 &
loadPID=$!
status=0
go test -race -count=3 -timeout 60m "${pkgs[@]}" || status=$?
if ! wait "$loadPID"; then
	echo "stress: the load package $load failed too (its log: /tmp/uprev-stress-load.log)"
	status=1
fi
exit "$status"
