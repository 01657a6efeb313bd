# uprev — build, test and demo.

BIN := $(CURDIR)/bin
K8S_ASSETS := $(BIN)/k8s
CONTROLLER_GEN := $(BIN)/controller-gen
CONTROLLER_GEN_VERSION := v0.23.0
export KUBEBUILDER_ASSETS := $(K8S_ASSETS)

.PHONY: all build test bench fuzz lint generate manifests demo controlplane

all: build

## build: compile the manager binary into bin/uprev.
build:
	go build -o $(BIN)/uprev .

## controlplane: build kube-apiserver and etcd from the Go module proxy (only when missing).
controlplane: $(K8S_ASSETS)/kube-apiserver $(K8S_ASSETS)/etcd $(K8S_ASSETS)/kubectl

$(K8S_ASSETS)/kube-apiserver $(K8S_ASSETS)/etcd $(K8S_ASSETS)/kubectl:
	test/controlplane/build.sh $(K8S_ASSETS)

## test: every test, race detector on, against real control planes.
test: controlplane
	go vet ./...
	go test -race -timeout 30m ./...

## bench: the benchmarks whose figures are in docs/benchmarks.md.
bench: controlplane
	go test -run '^$$' -bench . -benchmem -benchtime 3x -timeout 60m ./...

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
	./internal/update:FuzzParseMarker \
	./internal/update:FuzzRewrite \
	./internal/webhook:FuzzParseRegistryPush

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "go test -run '^\$$' -fuzz '^$$name\$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $$pkg"; \
		go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $$pkg; \
	done

## lint: formatting and vet.
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	go vet ./...
	cd test/controlplane && go vet ./...

$(CONTROLLER_GEN):
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

## generate: deepcopy functions for api/.
generate: $(CONTROLLER_GEN)
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

## manifests: CRDs (uprev's and Flux's image kinds) and RBAC.
manifests: $(CONTROLLER_GEN)
	$(CONTROLLER_GEN) crd paths=./api/... paths=github.com/fluxcd/image-reflector-controller/api/v1 output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=uprev-manager paths=./controllers/... output:rbac:artifacts:config=config/rbac

## demo: a real control plane, registry and Git server; watch a tag push move a policy.
demo: controlplane
	go test -count=1 -run TestDemo -v ./test/demo
