# runbox — the README's two commands are `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c

GO      ?= go
BIN     := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo none)
DATE    ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(DATE)
ARCH    := $(shell $(GO) env GOARCH)

.PHONY: all setup build demo test prefetch unit e2e e2e-prep chromium vet fmt clean bench stress soak fuzz release k8s-up k8s-down clients

all: build

## setup: install and start the Docker engine, runsc, debootstrap; build the sandbox image (idempotent)
setup:
	bash scripts/setup.sh

## build: the runbox binary and runbox-init (static, for the box)
build:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/runbox ./cmd/runbox
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags '-s -w' -o $(BIN)/runbox-init-linux-$(ARCH) ./cmd/runbox-init

## demo: a real MCP session through the real server into real containers
demo: setup build
	$(GO) run ./examples/demo --server $(BIN)/runbox

## test: set everything up and run every test (unit with fuzz seeds, a short fuzz run, e2e with real Docker and real
## MCP clients), stage by stage (scripts/test.sh); it ends with each stage's time and the slowest 20 tests
test:
	bash scripts/test.sh

## prefetch: start the two slow tool builds that only tests need (the test cluster's Kubernetes,
## ~12 min cold; goreleaser, ~8 min cold) in the background, beside the image build, which waits
## on the network more than on the CPU. Both are cached per machine, keyed on their versions
## (scripts/cache.sh: ~/.cache/runbox), so a fresh clone finds them built. Each holds its build's
## lock, so `release` and `k8s-up` wait for it and then find it cached; one that failed is run
## again there, in the foreground. Logs: .cache/logs/.
prefetch:
	@mkdir -p .cache/logs
	@bash scripts/k8s/build.sh >.cache/logs/k8s-build.log 2>&1 </dev/null &
	@bash scripts/release.sh install >.cache/logs/goreleaser-install.log 2>&1 </dev/null &

## unit: every package's tests and fuzz seeds; each test's time goes to .cache/logs/unit-times.tsv
unit:
	@mkdir -p .cache/logs
	$(GO) test -count=1 -json ./... | $(GO) run ./scripts/testreport -times .cache/logs/unit-times.tsv

## fuzz: each fuzz target for FUZZ_TIME (its committed seeds also run in `make unit`). A count
## of executions, not a duration: Go 1.26's fuzzer can fail a duration-bounded run with
## "context deadline exceeded" when its time is up (go.dev/issue/75804, fixed in Go 1.27).
FUZZ_TIME    ?= 50000x
FUZZ_TARGETS := runs:FuzzRunCodeArgs runs:FuzzInputPath sandbox:FuzzChannel internal/initproto:FuzzReceive internal/langerr:FuzzParse contract:FuzzFirstLine internal/initproto:FuzzPrestart internal/initproto:FuzzResetReader internal/initproto:FuzzReceiveMatchesJSON
fuzz:
	@for t in $(FUZZ_TARGETS); do \
	  echo "fuzz $${t##*:} ($(FUZZ_TIME))"; \
	  $(GO) test -run '^$$' -fuzz "^$${t##*:}$$" -fuzztime $(FUZZ_TIME) ./$${t%%:*} || exit 1; \
	done

## release: check .goreleaser.yaml and build every archive into dist/ as a snapshot (goreleaser
## v2.14.0, installed once through the Go module proxy into the machine's cache)
release:
	bash scripts/release.sh check
	bash scripts/release.sh snapshot </dev/null

## e2e: the end-to-end suite against the real engine; its Podman subset runs against
## `podman system service` (scripts/podman.sh installs and starts it, idempotently) and
## its Kubernetes subset against the single-node test cluster (make k8s-up)
## (each test's time goes to .cache/logs/e2e-times.tsv)
e2e: e2e-prep
	@mkdir -p .cache/logs
	RUNBOX_PODMAN_HOST=$$(bash scripts/podman.sh | sed 's/^DOCKER_HOST=//') \
	RUNBOX_K8S_KUBECONFIG=$$(bash scripts/k8s/up.sh 2>/dev/null) \
	  $(GO) test -count=1 -tags e2e -timeout $(E2E_TIMEOUT) -parallel $(E2E_PARALLEL) -json ./e2e/ | $(GO) run ./scripts/testreport -times .cache/logs/e2e-times.tsv

## e2e-prep: what e2e needs beside the engine: the npm packages of its clients, Debian's chromium
## and the npm packages that drive it (the view's test), and the test cluster
e2e-prep: e2e/ts/node_modules e2e/clients/node_modules e2e/view/node_modules chromium k8s-up

## chromium: Debian's chromium, for the view's end-to-end test (installed when missing)
chromium:
	bash scripts/chromium.sh >/dev/null

## E2E_TIMEOUT: e2e's alarm (go test -timeout), which prints every goroutine and fails the run
E2E_TIMEOUT ?= 70m

## E2E_PARALLEL: how many parallel e2e tests and subtests run at once (go test -parallel); they
## run after the serial ones and mostly wait on their programs' clocks, containers and child
## processes, not on the 2 cores
E2E_PARALLEL ?= 4

## k8s-up: start the single-node Kubernetes test cluster (root; binaries built once from the
## Go module proxy into the machine's cache) and import the runbox-init image into it
k8s-up: build
	bash scripts/k8s/up.sh
	bash scripts/k8s/import-init.sh $(BIN)/runbox-init-linux-$(ARCH) >/dev/null

## k8s-down: stop the test cluster and clean up after it on the host
k8s-down:
	bash scripts/k8s/down.sh

e2e/ts/node_modules: e2e/ts/package.json e2e/ts/package-lock.json
	bash scripts/npm.sh e2e/ts ci
	@touch $@

## e2e/view/node_modules: the view's test host (playwright-core, ext-apps' AppBridge, the reference
## TypeScript SDK client; versions pinned in e2e/view/package.json)
e2e/view/node_modules: e2e/view/package.json e2e/view/package-lock.json
	bash scripts/npm.sh e2e/view ci
	@touch $@

## e2e/clients/node_modules: the agent CLIs TestClients drives (Claude Code, Codex, Gemini CLI,
## opencode; versions pinned in e2e/clients/package.json)
e2e/clients/node_modules: e2e/clients/package.json e2e/clients/package-lock.json
	# npm install, not npm ci: the registry here serves only the linux-x64 builds of opencode's
	# per-platform packages, so the lock names no other platform's and npm ci refuses it as out
	# of sync. The lock still pins every version installed.
	bash scripts/npm.sh e2e/clients install
	@touch $@

## clients: every scenario on every agent client (make e2e runs every scenario on Claude Code and
## one on each other client); what each client's model received is in docs/clients.md
clients: setup build e2e/ts/node_modules e2e/clients/node_modules
	RUNBOX_CLIENTS=all $(GO) test -count=1 -tags e2e -timeout 40m -run 'TestClients' -v ./e2e/

vet:
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/
	@test -z "$$(gofmt -l $$(git ls-files "*.go"))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files "*.go"); exit 1; }

fmt:
	gofmt -w $$(git ls-files "*.go")

clean:
	rm -rf $(BIN)

## stress: the full load (500 calls at concurrency 16 over stdio and HTTP) and the adversarial suite
stress: setup build e2e/ts/node_modules
	RUNBOX_LOAD_CALLS=500 $(GO) test -count=1 -tags e2e -timeout 60m -run 'TestLoad|TestAdversarial' -v ./e2e/ | grep -E '^(=== RUN|--- |ok|FAIL|PASS)|calls at'

## soak: a team server for SOAK_TIME (default 30m) under 20 clients on 5 tokens (one-off runs, sessions,
## long runs, tool calls, a declared endpoint) beside a hostile client (others' cancels, runs and sessions,
## dripped, oversized and idle connections): every call answered right, no cross-token effect, RSS and
## open descriptors flat, no box left; ends with a table. All traffic to 127.0.0.1; not part of `make test`
SOAK_TIME ?= 30m
soak: setup build
	RUNBOX_SOAK=$(SOAK_TIME) $(GO) test -count=1 -tags e2e -timeout 5h -run '^TestSoak$$' -v ./e2e/

## bench: latency of runbox against docker baselines on the same image (prints a table; the
## large-output row runs the TypeScript SDK client from e2e/ts too)
bench: setup build e2e/ts/node_modules
	$(GO) run ./bench --server $(BIN)/runbox
