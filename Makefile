# Cordon's developer tasks. 'make' (or 'make help') lists them.
#
# Tests that need PostgreSQL read CORDON_TEST_DATABASE_URL. When it is empty,
# 'make test' starts a throwaway local cluster (scripts/db.sh, which installs
# PostgreSQL 15 and pgvector when missing), runs the tests against it, and
# stops it again; likewise a throwaway Citus cluster (scripts/citus-cluster.sh,
# which builds Citus once per machine with scripts/citus-install.sh) for the
# Citus tests, which read CORDON_TEST_CITUS_URL (CORDON_REQUIRE_CITUS=1 makes
# them fail instead of skip). It also installs the local embedding model first
# (scripts/model-install.sh, embed/localmodel) and runs the tests with
# CORDON_REQUIRE_MODEL=1, so tests that need the model fail instead of
# skipping.

SHELL := /bin/bash
GO ?= go
GOFLAGS ?=
PKGS := ./...
# Packages whose results must be bit-identical on every architecture; 'make
# test' also runs them as GOARCH=arm64 under qemu-user-static when it is there.
PORTABLE_PKGS := ./analysis/ ./bm25/ ./chunk/ ./hashembed/ ./fusion/ ./retrieval/ ./grounding/ ./assemble/ ./store/memory/ ./replay/
FUZZTIME ?= 30s

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_\/-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: demo
demo: ## run the worked demo on the in-memory store (no database needed)
	$(GO) run ./cmd/cordon demo

# Stamped into 'cordon version' and cordon_build_info (deploy/Dockerfile
# passes the same three as build arguments).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
VERSION_PKG := github.com/cordon-rag/cordon/internal/version
LDFLAGS := -X $(VERSION_PKG).version=$(VERSION) -X $(VERSION_PKG).commit=$(COMMIT) -X $(VERSION_PKG).date=$(DATE)

.PHONY: build
build: ## build the cordon binary into ./cordon, stamped with version, commit and date
	$(GO) build -ldflags "$(LDFLAGS)" -o cordon ./cmd/cordon

.PHONY: test
test: ## run every test (installs the local embedding model first), against a throwaway PostgreSQL unless CORDON_TEST_DATABASE_URL is set
	@set -euo pipefail; \
	bash scripts/model-install.sh; \
	if [ -n "$${CORDON_TEST_DATABASE_URL:-}" ]; then \
		bash scripts/compat-check.sh "$$CORDON_TEST_DATABASE_URL"; \
		CORDON_REQUIRE_MODEL=1 $(GO) test $(GOFLAGS) -count=1 -timeout 60m $(PKGS); \
	else \
		url=$$(bash scripts/db.sh start); \
		trap 'bash scripts/db.sh stop >/dev/null 2>&1 || true; bash scripts/citus-cluster.sh stop >/dev/null 2>&1 || true' EXIT; \
		citus=$$(bash scripts/citus-cluster.sh start); \
		echo "using throwaway PostgreSQL at $$url and a Citus cluster (coordinator and two workers) at $$citus"; \
		bash scripts/compat-check.sh "$$url"; \
		CORDON_TEST_DATABASE_URL=$$url CORDON_REQUIRE_DB=1 CORDON_TEST_CITUS_URL=$$citus CORDON_REQUIRE_CITUS=1 CORDON_REQUIRE_MODEL=1 $(GO) test $(GOFLAGS) -count=1 -timeout 60m $(PKGS); \
	fi; \
	if command -v qemu-aarch64-static >/dev/null; then \
		echo "running the portable packages as GOARCH=arm64 under qemu-user-static"; \
		GOARCH=arm64 $(GO) test -count=1 -exec qemu-aarch64-static $(PORTABLE_PKGS); \
	else \
		echo "qemu-user-static not installed: skipping the arm64 run (apt-get install qemu-user-static)"; \
	fi

.PHONY: test/compat
test/compat: ## the previous release (.ci/previous-release) replays its golden scripts against this tree's migrations (scripts/compat-check.sh; part of test)
	@set -euo pipefail; \
	if [ -n "$${CORDON_TEST_DATABASE_URL:-}" ]; then \
		bash scripts/compat-check.sh "$$CORDON_TEST_DATABASE_URL"; \
	else \
		url=$$(bash scripts/db.sh start); \
		trap 'bash scripts/db.sh stop >/dev/null 2>&1 || true' EXIT; \
		bash scripts/compat-check.sh "$$url"; \
	fi

.PHONY: test/citus
test/citus: ## run the Citus tests (integration_test/citus_test.go) against a throwaway coordinator and two workers (scripts/citus-cluster.sh)
	@set -euo pipefail; \
	citus=$$(bash scripts/citus-cluster.sh start); \
	trap 'bash scripts/citus-cluster.sh stop >/dev/null 2>&1 || true' EXIT; \
	CORDON_TEST_DATABASE_URL=$$citus CORDON_TEST_CITUS_URL=$$citus CORDON_REQUIRE_CITUS=1 $(GO) test $(GOFLAGS) -count=1 -timeout 30m -run Citus -v ./integration_test/

# The container path (docs/running.md, "Container tests"): a private
# Docker engine without a bridge (scripts/docker-engine.sh; stopped again
# if this target started it), the images built from Debian's archive
# (scripts/docker-images.sh), then the tests that run containers through
# testcontainers-go on the host's network: the integration tests (their
# PostgreSQL a container, not scripts/db.sh's cluster), package cordontest
# and the image smoke test. Every one of them fails without the engine.
# CONTAINER_RUN=REGEXP runs only the tests it matches (of integration_test
# and cordontest; the smoke test always runs).
CONTAINER_ENV := CORDON_TEST_DATABASE_URL= TESTCONTAINERS_RYUK_DISABLED=true CORDON_REQUIRE_DOCKER=1 CORDON_REQUIRE_DB=1 \
	CORDON_TEST_IMAGE=cordon-pg:15 CORDON_TEST_NETWORK=host CORDON_TEST_CORDON_IMAGE=cordon:local

.PHONY: test/containers
test/containers: ## the integration tests, cordontest and the image smoke test through testcontainers, on a private Docker engine with images built from Debian's archive (root; installs the local embedding model first, as test does)
	@set -euo pipefail; \
	bash scripts/model-install.sh; \
	if ! bash scripts/docker-engine.sh env >/dev/null 2>&1; then \
		trap 'bash scripts/docker-engine.sh stop >/dev/null 2>&1 || true' EXIT; \
	fi; \
	export "$$(bash scripts/docker-engine.sh start)"; \
	bash scripts/docker-images.sh; \
	bash scripts/docker-engine.sh prune; \
	rc=0; \
	$(CONTAINER_ENV) $(GO) test $(GOFLAGS) -count=1 -timeout 30m $(if $(CONTAINER_RUN),-run '$(CONTAINER_RUN)') ./integration_test/ ./cordontest/ || rc=$$?; \
	$(CONTAINER_ENV) $(GO) test $(GOFLAGS) -count=1 -timeout 10m -run '^TestImage$$' ./deploy/ || rc=$$?; \
	bash scripts/docker-engine.sh prune; \
	exit $$rc

.PHONY: docker/start
docker/start: ## start the private Docker engine (scripts/docker-engine.sh) and print its DOCKER_HOST
	@bash scripts/docker-engine.sh start

.PHONY: docker/stop
docker/stop: ## stop the private Docker engine (its images stay in /var/lib/cordon-docker)
	@bash scripts/docker-engine.sh stop

.PHONY: docker/images
docker/images: ## build the container tests' images: cordon-base:bookworm, cordon-pg:15, cordon:local (scripts/docker-images.sh)
	@export "$$(bash scripts/docker-engine.sh env)" && bash scripts/docker-images.sh

.PHONY: model
model: ## install the local embedding model (embed/localmodel: Universal Sentence Encoder lite, Node.js, no network at run time)
	bash scripts/model-install.sh

.PHONY: test/race
test/race: ## run every test with the race detector
	$(MAKE) test GOFLAGS=-race

.PHONY: test/arm64
test/arm64: ## run the portable packages as GOARCH=arm64 under qemu-user-static (apt-get install qemu-user-static)
	GOARCH=arm64 $(GO) test -count=1 -exec qemu-aarch64-static $(PORTABLE_PKGS)

.PHONY: fuzz
fuzz: ## fuzz the tokenizer, term vocabulary, chunker, HTML converter, replay decoder, postings array and column block decoders, HTTP body, token-claims and embedding-answer decoders and the API-key redaction for FUZZTIME each
	$(GO) test ./analysis/ -run '^$$' -fuzz '^FuzzTokenize$$' -fuzztime $(FUZZTIME)
	$(GO) test ./analysis/ -run '^$$' -fuzz '^FuzzVocabulary$$' -fuzztime $(FUZZTIME)
	$(GO) test ./chunk/ -run '^$$' -fuzz '^FuzzSplit$$' -fuzztime $(FUZZTIME)
	$(GO) test ./htmltext/ -run '^$$' -fuzz '^FuzzHTML$$' -fuzztime $(FUZZTIME)
	$(GO) test ./replay/ -run '^$$' -fuzz '^FuzzRun$$' -fuzztime $(FUZZTIME)
	$(GO) test ./store/postgres/ -run '^$$' -fuzz '^FuzzPostingsArrays$$' -fuzztime $(FUZZTIME)
	$(GO) test ./store/postgres/ -run '^$$' -fuzz '^FuzzDecodeCols$$' -fuzztime $(FUZZTIME)
	$(GO) test ./store/postgres/ -run '^$$' -fuzz '^FuzzDecodePacked$$' -fuzztime $(FUZZTIME)
	$(GO) test ./server/ -run '^$$' -fuzz '^FuzzDecodeStrict$$' -fuzztime $(FUZZTIME)
	$(GO) test ./server/ -run '^$$' -fuzz '^FuzzReadLine$$' -fuzztime $(FUZZTIME)
	$(GO) test ./server/ -run '^$$' -fuzz '^FuzzWalkJSON$$' -fuzztime $(FUZZTIME)
	$(GO) test ./server/ -run '^$$' -fuzz '^FuzzCheckClaims$$' -fuzztime $(FUZZTIME)
	$(GO) test ./embed/ -run '^$$' -fuzz '^FuzzDecodeOpenAI$$' -fuzztime $(FUZZTIME)
	$(GO) test ./embed/ -run '^$$' -fuzz '^FuzzDecodeOllama$$' -fuzztime $(FUZZTIME)
	$(GO) test ./embed/ -run '^$$' -fuzz '^FuzzDecodeTEI$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/redact/ -run '^$$' -fuzz '^FuzzString$$' -fuzztime $(FUZZTIME)

.PHONY: golden
golden: ## regenerate the golden replay outputs in testdata/replay
	$(GO) test ./replay/ -run Golden -update

# staticcheck release 2026.2.2
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: lint
lint: ## gofmt, go vet, staticcheck, and promtool on the alert rules (scripts/promtool-check.sh)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)
	bash scripts/promtool-check.sh

.PHONY: bench
bench: ## micro-benchmarks with allocation counts
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

BENCH_ARGS ?= --chunks 100000 --queries 100 --concurrency 8 --serial 100 --batch 50 --cache-mib 4096
.PHONY: bench/run
bench/run: ## cordon-lab bench against a throwaway PostgreSQL (BENCH_ARGS=...; report in bench-report.json)
	@URL=$$(bash scripts/db.sh start) && $(GO) run ./cmd/cordon-lab bench --database-url "$$URL" $(BENCH_ARGS) --json > bench-report.json && echo "wrote bench-report.json"

.PHONY: db/start
db/start: ## start a throwaway PostgreSQL + pgvector and print its URL
	@bash scripts/db.sh start

.PHONY: db/stop
db/stop: ## stop and remove the throwaway PostgreSQL
	@bash scripts/db.sh stop
