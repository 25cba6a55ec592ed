# kubectl-livesync. `make demo` runs the product end to end on a local cluster built from
# source; `make test` runs every test (unit, integration, e2e on that cluster).
GO       ?= go
BIN      := bin/kubectl-livesync
PKG      := github.com/livesync-dev/kubectl-livesync
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT   ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
DATE     ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS  := -s -w -X $(PKG)/pkg/version.Version=$(VERSION) -X $(PKG)/pkg/version.Commit=$(COMMIT) -X $(PKG)/pkg/version.Date=$(DATE)

.PHONY: build test test-unit e2e lint verify demo cluster-up cluster-down deps

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/kubectl-livesync

## test: unit + integration (in-process registry) + e2e on the local cluster
test: verify test-unit e2e

## test-unit: unit tests and integration tests that need no cluster (real OCI registry on 127.0.0.1)
test-unit:
	$(GO) test -race -count=1 ./...
	cd hack/localcluster/tools && $(GO) test -count=1 ./...

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
