# kubectl-livesync. `make demo` runs the product end to end on a local cluster built from
# source; `make test` runs every test (unit, integration, e2e on that cluster).
GO       ?= go
BIN      := bin/kubectl-livesync
PKG      := github.com/livesync-dev/kubectl-livesync
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT   ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
DATE     ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS  := -s -w -X $(PKG)/pkg/version.Version=$(VERSION) -X $(PKG)/pkg/version.Commit=$(COMMIT) -X $(PKG)/pkg/version.Date=$(DATE)

.PHONY: build test test-unit test-windows e2e lint verify demo cluster-up cluster-down deps

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/kubectl-livesync
	install -m 0755 cmd/kubectl_complete-livesync/kubectl_complete-livesync bin/

## test: unit + integration (in-process registry) + e2e on the local cluster
test: verify verify-docs test-unit test-windows krew-test e2e

## test-unit: unit tests and integration tests that need no cluster (real OCI registry on 127.0.0.1);
## prints package lines, failures and skips, and fails on a skip not in hack/skips-allowed.txt
test-unit:
	hack/check-skips.sh -race -count=1 ./...
	hack/check-skips.sh -count=1 -run 'Allocs|AllocatesLittle' ./pkg/planner ./pkg/remote ./pkg/tarstream
	cd hack/localcluster/tools && ../../check-skips.sh -count=1 ./...

## test-windows: the Windows unit tests of the OS-dependent packages, as Windows binaries under
## wine (hack/wine.sh installs wine and mingw-w64 from Debian on first use; skips: hack/skips-wine.txt)
test-windows:
	hack/wine.sh unit

## verify: gofmt, go vet and the house rules on imports
verify:
	hack/verify.sh

## e2e: bring the local cluster up (unless KUBECONFIG and LIVESYNC_E2E_REGISTRY point at one), run test/e2e, tear down
e2e: build
	hack/e2e.sh

## lint: golangci-lint v2, pinned and built from the module proxy
lint:
	hack/lint.sh

## demo: the product end to end on the local cluster; leaves the cluster up
demo: build
	hack/demo.sh

deps:
	hack/deps.sh

cluster-up:
	hack/localcluster/up.sh

cluster-down:
	hack/localcluster/down.sh

## bench: latency, throughput, fan-out and watcher cost against the baselines, on the local
## cluster (~10 min; not part of make test). Table on stdout, rows in _output/bench.json.
.PHONY: bench
bench: build
	test/bench/run.sh $(BENCH_ARGS)

## install: bin/kubectl-livesync and its completion shim into $(PREFIX)/bin, where kubectl finds them
PREFIX ?= /usr/local
.PHONY: install dist dist-manifest verify-dist krew-test docs verify-docs
install: build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BIN) bin/kubectl_complete-livesync $(DESTDIR)$(PREFIX)/bin/

## dist: reproducible release archives of all six platforms + dist/checksums.txt (hack/release.sh)
dist:
	hack/release.sh

## dist-manifest: rebuild the archives and rewrite plugins/livesync.yaml with their sums
dist-manifest:
	hack/release.sh --update-manifest

## verify-dist: the committed plugins/livesync.yaml carries the sums of `make dist` (opt-in, slow cold)
verify-dist:
	hack/release.sh --check-manifest
	hack/krew-test.sh --committed

## krew-test: validate both krew manifests, krew-install this platform's archive, kubectl livesync
## version and bash completion through kubectl (krew built from the module proxy)
krew-test:
	hack/krew-test.sh

## docs: regenerate docs/reference.md (every command's synopsis, docs page and flags) from the cobra commands
docs:
	$(GO) run ./hack/gendocs docs/reference.md

## verify-docs: docs/reference.md matches the commands; every relative link and #anchor in the Markdown resolves;
## every error:/warning: line quoted in a code block is one pkg/ prints
verify-docs:
	hack/verify-docs.sh
