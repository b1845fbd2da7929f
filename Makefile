# kubectl gitops — see README.md. `make test` is the one command CI runs.
GO       ?= go
VERSION  ?= $(shell git describe --tags --match 'v*' 2>/dev/null || echo v0.1.0-dev)
COMMIT   ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
CREATED  ?= $(shell git log -1 --format=%cI 2>/dev/null)
DATE     ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
PKG      := github.com/kubectl-gitops/kubectl-gitops
STAMP    := -X $(PKG)/plugin.version=$(VERSION) -X $(PKG)/plugin.commit=$(COMMIT) -X $(PKG)/plugin.date=$(DATE)
LDFLAGS  := -s -w $(STAMP)
# make e2e runs the Argo CD 3.6.1 suite as this many processes at once.
E2E_SHARDS ?= 2

# Pinned test binaries, built once into ~/.cache/kubectl-gitops (hack/tools).
KUBE_TOOLS  := etcd=go.etcd.io/etcd/server/v3 kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver
# kube130 and kube137: the kube-apiserver of the other Kubernetes releases (test/env KubeReleases).
APISERVER   := kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver
ARGO_TOOLS  := argocd=github.com/argoproj/argo-cd/v2/cmd
ARGO3_TOOLS := argocd=github.com/argoproj/argo-cd/v3/cmd
KREW_TOOLS  := krew=sigs.k8s.io/krew/cmd/krew validate-krew-manifest=sigs.k8s.io/krew/cmd/validate-krew-manifest
S3_TOOLS    := versitygw=github.com/versity/versitygw/cmd/versitygw
TSA_TOOLS   := timestamp-server=github.com/sigstore/timestamp-authority/v2/cmd/timestamp-server
# helm and kustomize: on the repo-server's PATH, as Argo CD's image bundles them.
RENDER_TOOLS := helm=helm.sh/helm/v4/cmd/helm kustomize=sigs.k8s.io/kustomize/kustomize/v5
IMAGE_TOOLS := build-image=$(PKG)/hack/tools/image/build-image cyclonedx-gomod=github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod

.PHONY: build test unit e2e lint tools demo-tools bench demo docs krew image clean require

build: ## the plugin binary, bin/kubectl-gitops
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/kubectl-gitops ./cmd/kubectl-gitops

test: require lint unit e2e ## everything CI checks

require: ## check (and install, as root or with sudo) redis-server, tmux, zsh, bash-completion, git, jq and openssl, and that kubectl is there
	@hack/require.sh

unit: require ## unit and command tests (no cluster; the e2e suite is behind the e2e build tag)
	$(GO) test -count=1 ./...

demo-tools: ## build only what make demo runs: etcd, kube-apiserver 1.35, Argo CD 3.6.1, helm and kustomize
	@hack/tools/build.sh kube $(KUBE_TOOLS) >/dev/null
	@hack/tools/build.sh argocd3 $(ARGO3_TOOLS) >/dev/null
	@hack/tools/build.sh render $(RENDER_TOOLS) >/dev/null

tools: demo-tools ## build the pinned test environment binaries (cached outside the repo)
	@hack/tools/build.sh kube130 $(APISERVER) >/dev/null
	@hack/tools/build.sh kube137 $(APISERVER) >/dev/null
	@hack/tools/build.sh argocd $(ARGO_TOOLS) >/dev/null
	@hack/tools/build.sh krew $(KREW_TOOLS) >/dev/null
	@hack/tools/build.sh image $(IMAGE_TOOLS) >/dev/null
	@hack/tools/build.sh s3 $(S3_TOOLS) >/dev/null
	@hack/tools/build.sh tsa $(TSA_TOOLS) >/dev/null

e2e: require tools ## end-to-end tests against real kube-apiserver 1.35 and Argo CD 3.6.1, the core loop (the tests that call core(t)) against 2.14.21, then the tests that need only the API server (apiOnly(t): the admission policies') on Kubernetes 1.30, the oldest README claims, and 1.37, with no Argo CD process
	@# The 3.6.1 suite runs as E2E_SHARDS processes, each with an environment of its own, and the
	@# 2.14.21 core run beside them, followed by the API-only runs (no Argo CD: they wait on the API
	@# server alone): the suites mostly wait on Argo CD's controllers, so three environments share
	@# CI's 2 cores well, and one after the other they took CI's warm run past 15 minutes.
	@pids=; for i in $$(seq 0 $$(($(E2E_SHARDS)-1))); do \
		ARGOCD_VERSION=3.6.1 E2E_SHARD=$$i/$(E2E_SHARDS) $(GO) test -tags e2e -count=1 -shuffle=on -timeout 30m ./test/e2e/... & pids="$$pids $$!"; \
	done; \
	( ARGOCD_VERSION=2.14.21 $(GO) test -tags e2e -count=1 -shuffle=on -timeout 30m ./test/e2e/...; core=$$?; \
	  KUBE_VERSION=1.30.14 E2E_API_ONLY=1 $(GO) test -tags e2e -count=1 -shuffle=on -timeout 10m ./test/e2e/... && \
	  KUBE_VERSION=1.37.2 E2E_API_ONLY=1 $(GO) test -tags e2e -count=1 -shuffle=on -timeout 10m ./test/e2e/...; api=$$?; \
	  test $$core -eq 0 -a $$api -eq 0 ) & pids="$$pids $$!"; \
	rc=0; for p in $$pids; do wait $$p || rc=1; done; exit $$rc

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags e2e ./...

bench: tools ## benchmarks, ending with one table of figures and goals (BENCH_RUNS sets the break-glasses per revert condition, default 10)
	$(GO) test -run '^$$' -bench 'EnvironmentStartup|ColdStart|AuditAtScale|TimeToLiveFix|SelfHealReverts|StatusAtScale|DriftAtScale|ControllerAtScale|AutoRestoreLatency|MirrorLag|MirrorAtScale' -benchtime 1x -timeout 90m ./test/bench/...

demo: require demo-tools build ## the break-glass story on a real environment; Ctrl-C ends it (builds only the tools it runs)
	$(GO) run ./test/demo

docs: ## the command reference in docs/commands, generated from the cobra tree (make unit fails when it is stale)
	$(GO) test ./plugin -run '^TestCommandReferenceIsCurrent$$' -count=1 -update

krew: ## release archives in dist/ with an SBOM each, and krew/gitops.yaml, validated by krew's own validator
	$(GO) run ./krew -version $(VERSION) -dist dist -out krew/gitops.yaml -ldflags '$(STAMP)' \
		-cyclonedx-gomod $$(hack/tools/build.sh image $(IMAGE_TOOLS))/cyclonedx-gomod
	$$(hack/tools/build.sh krew $(KREW_TOOLS))/validate-krew-manifest -manifest krew/gitops.yaml -skip-install

DIST            ?= dist
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
image: ## the controller's image, an OCI layout in dist/image with an SBOM per platform, built with no container runtime
	tools=$$(hack/tools/build.sh image $(IMAGE_TOOLS)) && $$tools/build-image -version $(VERSION) -revision '$(REVISION)' \
		-created '$(CREATED)' -platforms $(IMAGE_PLATFORMS) -dist $(DIST) -ldflags '$(STAMP)' -cyclonedx-gomod $$tools/cyclonedx-gomod

clean:
	rm -rf bin dist
