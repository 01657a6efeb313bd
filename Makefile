# uprev — build, test and demo.

BIN := $(CURDIR)/bin
K8S_ASSETS := $(BIN)/k8s
CONTROLLER_GEN := $(BIN)/controller-gen
CONTROLLER_GEN_VERSION := v0.23.0
LINT := $(BIN)/uprev-lint
ACTIONLINT := $(BIN)/actionlint
ACTIONLINT_VERSION := v1.7.12
PROMTOOL_VERSION := v0.316.0
export KUBEBUILDER_ASSETS := $(K8S_ASSETS)
# Every go command make runs (lint's vet, the tests, stress, the builds)
# compiles trimmed: without the checkout's path, so that Go's build cache
# holds across clones and worktrees (otherwise each new path compiles and
# vets every uprev package again: minutes). Tests find the repository
# from their working directory (internal/testenv/reporoot).
export GOFLAGS := $(strip -trimpath $(GOFLAGS))

# VERSION is stamped into the binary (`uprev version`) and tags the
# manager's image in dist/install.yaml.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# Evaluated once, so that every artifact of one `make release` has the same.
VERSION := $(VERSION)
# IMAGE is the manager's image, without tag, that dist/install.yaml runs.
IMAGE ?= ghcr.io/uprev-dev/uprev
DIST ?= $(CURDIR)/dist
RELEASE_PLATFORMS := linux/amd64 linux/arm64
VERSION_LDFLAGS := -X github.com/uprev-dev/uprev/internal/version.stamped=$(VERSION)
# GO_BUILD builds every binary as the release does: static and trimmed.
# The tests build theirs the same way (internal/testenv/manager), so that
# from empty caches each package compiles once for all of them.
GO_BUILD := CGO_ENABLED=0 go build -trimpath
# Release binaries are stripped, as the image's is.
LDFLAGS := -s -w $(VERSION_LDFLAGS)

.PHONY: all build test stress test-programs bench fuzz lint generate manifests cluster-api-crd demo demo-down controlplane flux gitea promtool actionlint release release-binaries release-manifests release-chart image

all: build

## build: compile uprev, static and trimmed as released, the version stamped in, into bin/uprev.
build:
	$(GO_BUILD) -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/uprev .

## release: what the release workflow publishes, into DIST: the binaries, install.yaml, the chart's package and the image (an OCI layout with its SBOMs), for VERSION (default: git describe).
release: release-binaries release-manifests release-chart image

## release-chart: DIST/uprev-<version>.tgz, charts/uprev packaged for VERSION with Helm's library (its links into config/ resolved).
release-chart:
	go run ./hack/release-chart --version "$(VERSION)" --output $(DIST)

comma := ,
empty :=
space := $(empty) $(empty)

## image: the manager's image for RELEASE_PLATFORMS, built without Docker and reproducibly (hack/image), as an OCI image layout in DIST/image with an SPDX SBOM per platform.
image:
	go run ./hack/image --version "$(VERSION)" --platforms "$(subst $(space),$(comma),$(RELEASE_PLATFORMS))" --output $(DIST)/image

## release-binaries: static uprev binaries for RELEASE_PLATFORMS, the version stamped in, into DIST.
release-binaries:
	@mkdir -p $(DIST)
	@set -e; for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; \
		echo "GOOS=$$os GOARCH=$$arch $(GO_BUILD) -ldflags \"$(LDFLAGS)\" -o $(DIST)/uprev-$$os-$$arch ."; \
		GOOS=$$os GOARCH=$$arch $(GO_BUILD) -ldflags "$(LDFLAGS)" -o $(DIST)/uprev-$$os-$$arch .; \
	done

## release-manifests: DIST/install.yaml, config/default with the manager's image pinned to IMAGE:VERSION.
release-manifests:
	go run ./hack/release-manifests --version "$(VERSION)" --image "$(IMAGE)" --output $(DIST)/install.yaml

## controlplane: build kube-apiserver and etcd from the Go module proxy (only when missing).
controlplane: $(K8S_ASSETS)/kube-apiserver $(K8S_ASSETS)/etcd $(K8S_ASSETS)/kubectl

# One run of the script builds the three (a grouped target, so that make -j
# runs it once).
$(K8S_ASSETS)/kube-apiserver $(K8S_ASSETS)/etcd $(K8S_ASSETS)/kubectl &:
	test/controlplane/build.sh $(K8S_ASSETS)

## flux: build the Flux CLI from the Go module proxy into bin/flux (only when missing), for test/fluxcli.
flux: $(BIN)/flux

$(BIN)/flux:
	test/flux/build.sh $(BIN)

## gitea: build Gitea from the Go module proxy into bin/gitea (only when missing), for the pull request tests.
gitea: $(BIN)/gitea

$(BIN)/gitea:
	test/gitea/build.sh $(BIN)

## promtool: build Prometheus's promtool (Prometheus 3.16, without its service discovery plugins, which rule tests do not use) from the Go module proxy into bin/promtool (only when missing), for test/monitoring.
promtool: $(BIN)/promtool

$(BIN)/promtool:
	cd / && GOBIN=$(BIN) GOFLAGS= go install -tags remove_all_sd github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION)

## test-programs: the programs the tests run (control plane, Flux CLI, Gitea, promtool), built when missing, side by side: from empty caches their module downloads overlap the others' compiles.
test-programs:
	$(MAKE) -j3 controlplane $(BIN)/flux $(BIN)/gitea $(BIN)/promtool

# LONGEST_FIRST are the test packages that take longest (the README's
# figures), named first so that go test starts them first: it runs
# packages in the order named, TEST_PARALLEL at a time, and a long one
# named last (./... names the test/ packages last) runs on alone at the
# end. ./... then adds every other package once.
LONGEST_FIRST := ./controllers ./test/demo ./test/install ./internal/cli ./hack/image ./test/tenancy \
	./internal/gitrepo ./test/fairness ./test/fluxcli ./test/e2e ./internal/signature ./test/restart

# TEST_PARALLEL is how many test packages run at once: one more than the
# cores, as the packages spend part of their time waiting on the control
# planes, managers and servers they start (at go's default of one per core,
# the 2-core machine sat 24% idle through `go test`). `make stress` runs as
# many side by side.
TEST_PARALLEL ?= $(shell echo $$(( $$(nproc) + 1 )))

## test: every test, race detector on, against real control planes.
test: test-programs
	go test -race -p $(TEST_PARALLEL) -timeout 30m $(LONGEST_FIRST) ./...

## stress: the test packages changed since STRESS_BASE (default HEAD~1, with uncommitted changes; STRESS_BASE=all: the whole suite) with -race -count=3, while ./controllers runs beside them (the load CI sees); run before every stop.
STRESS_BASE ?= HEAD~1
stress: test-programs
	hack/stress.sh $(STRESS_BASE)

## bench: the benchmarks whose figures are in docs/benchmarks.md (the 1,000-target fleet alone takes about 25 minutes at 3x on 2 cores).
bench: controlplane
	go test -run '^$$' -bench . -benchmem -benchtime 3x -timeout 120m ./...

## fuzz: every fuzz target for FUZZTIME each, one after another (rates in docs/benchmarks.md).
FUZZTIME ?= 1m
# FUZZMINIMIZE bounds the minimizing of each new input by a count of runs.
# Go's default (60s per input) spends a one-minute run minimizing the first
# inputs found, and drops the counts of minimizations cut off by time
# (docs/benchmarks.md, Fuzzing).
FUZZMINIMIZE ?= 1000x
# FUZZ_TARGETS is every fuzz target, as <package>:<name>. None needs a
# control plane. A new target is one more line here.
FUZZ_TARGETS := \
	./internal/crds:FuzzExtractArtifact \
	./internal/crds:FuzzParseDocument \
	./internal/guard:FuzzParseUpdateTrailers \
	./internal/kubeconfig:FuzzRESTConfig \
	./internal/policy:FuzzSelectLatest \
	./internal/signature:FuzzSplitJSON \
	./internal/signature:FuzzTagSignature \
	./internal/update:FuzzParseMarker \
	./internal/update:FuzzRewrite \
	./internal/webhook:FuzzParseRegistryPush

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "go test -run '^\$$' -fuzz '^$$name\$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $$pkg"; \
		go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $$pkg; \
	done

## lint: formatting (test/controlplane too: its three main.go files only call the upstream commands, and vetting them would compile and analyze all of Kubernetes' server code, minutes from empty caches); go vet's checks, staticcheck, unused, errcheck, ineffassign, gosec, bodyclose and the layering rules in one `go vet -vettool` pass (hack/lint); actionlint on the GitHub workflows.
lint: $(LINT) $(ACTIONLINT)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	@# -race: the packages compiled for the checks are the ones `make test` (go test -race) runs, compiled once.
	go vet -race -vettool=$(LINT) ./...
	cd hack/lint && go vet ./... && go test ./...
	$(ACTIONLINT) .github/workflows/*.yml

$(ACTIONLINT):
	GOBIN=$(BIN) go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)

# The linter is its own module (hack/lint/go.mod), so its analyzers stay
# out of uprev's go.mod; rebuilt when its sources change. Built without
# the commit stamped in (-buildvcs=false): go vet keeps its findings by the
# linter's content, and a linter that named its commit would differ at
# every commit and analyze every package again (3 minutes on 2 cores).
$(LINT): $(wildcard hack/lint/*.go) hack/lint/go.mod hack/lint/go.sum
	cd hack/lint && go build -buildvcs=false -o $(LINT) .

$(CONTROLLER_GEN):
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

## generate: deepcopy functions for api/.
generate: $(CONTROLLER_GEN)
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

## manifests: CRDs (uprev's, Flux's image kinds, and Flux's GitRepository apart) and RBAC.
manifests: $(CONTROLLER_GEN)
	$(CONTROLLER_GEN) crd paths=./api/... paths=github.com/fluxcd/image-reflector-controller/api/v1 paths=github.com/fluxcd/image-automation-controller/api/v1 output:crd:artifacts:config=config/crd/bases
	@# Flux's GitRepository CRD, which ImageUpdateAutomation reads, for clusters without source-controller (docs/migrate-from-flux.md).
	$(CONTROLLER_GEN) crd paths=github.com/fluxcd/source-controller/api/v1 output:crd:artifacts:config=$(BIN)/source-crds
	cp $(BIN)/source-crds/source.toolkit.fluxcd.io_gitrepositories.yaml config/crd/gitrepository/
	$(CONTROLLER_GEN) rbac:roleName=uprev-manager paths=./controllers/... output:rbac:artifacts:config=config/rbac

## cluster-api-crd: refresh the Cluster API Cluster CRD that the controllers' tests install (internal/testenv/cluster), from the Go module proxy.
CLUSTER_API_VERSION ?= v1.14.2
cluster-api-crd:
	cp "$$(go mod download -json sigs.k8s.io/cluster-api@$(CLUSTER_API_VERSION) | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')/core/config/crd/bases/cluster.x-k8s.io_clusters.yaml" internal/testenv/cluster/crds/cluster-api/
	chmod 644 internal/testenv/cluster/crds/cluster-api/cluster.x-k8s.io_clusters.yaml

## demo: a local fleet (three control planes, a registry, a Git server, bin/uprev), left running; prints a script to try.
DEMO_STATE ?= $(BIN)/demo
demo: controlplane build
	$(GO_BUILD) -o $(BIN)/uprev-demo ./hack/demo
	$(BIN)/uprev-demo up --state-dir $(DEMO_STATE) --uprev $(BIN)/uprev --assets $(K8S_ASSETS)

## demo-down: stop the demo that make demo started, and remove its state.
demo-down:
	go run ./hack/demo down --state-dir $(DEMO_STATE)
