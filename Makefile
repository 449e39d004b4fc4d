# Gatehouse — one Makefile for the whole go.work workspace.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

# The Go release the project builds, tests and is vulnerability-checked
# with. A machine's own Go may be older (and its GOROOT/go.env may say
# GOTOOLCHAIN=local): exporting it here makes the go command fetch and use
# this release through the module proxy.
export GOTOOLCHAIN := go1.27.3

SERVICES := edge authn tokens directory
# Every workspace module (pkg, the four services, e2e), as directories.
MODULES = $(shell GOTOOLCHAIN=$(GOTOOLCHAIN) go list -m -f '{{.Dir}}')
GO_TEST_FLAGS ?= -count=1 -timeout 15m

.PHONY: help
help: ## list targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk -F':.*?## ' '{printf "  %-18s %s\n", $$1, $$2}'

.PHONY: build
# cgo is left to Go's default (on where a C compiler is found): with it, the
# tokens service signs with OpenSSL when libcrypto.so.3 loads; without, with Go.
build: ## build bin/edge, bin/authn, bin/tokens, bin/directory and the CLI bin/gatehouse
	@mkdir -p bin
	@for s in $(SERVICES); do go build -trimpath -o bin/$$s ./services/$$s/cmd/$$s; done
	@go build -trimpath -o bin/gatehouse ./cli/cmd/gatehouse
	@echo "built: $(addprefix bin/,$(SERVICES)) bin/gatehouse"

.PHONY: run
run: build ## run the embedded server (one process, SQLite in ./data) on :8080
	@data=$${GATEHOUSE_DATA_DIR:-./data}; issuer=$${GATEHOUSE_ISSUER:-http://localhost:8080}; \
	echo ""; \
	echo "  Gatehouse starts at $$issuer. To administer it, in another terminal:"; \
	echo ""; \
	echo "    ./bin/gatehouse login --issuer $$issuer --key-file $$data/bootstrap-admin-key.json"; \
	echo "    ./bin/gatehouse orgs list"; \
	echo "    ./bin/gatehouse apply -f examples/acme.yaml --secrets-out acme-secrets.yaml"; \
	echo ""
	GATEHOUSE_DATA_DIR=$${GATEHOUSE_DATA_DIR:-./data} ./bin/edge

.PHONY: run-distributed
run-distributed: build ## run four processes on loopback with PostgreSQL and Redis
	./scripts/run-distributed.sh

.PHONY: test
test: node_modules ## run every test (PostgreSQL- and Redis-backed ones included)
	@failed=""; for m in $(MODULES); do echo "== $$m"; (cd $$m && go test $(GO_TEST_FLAGS) ./...) || failed="$$failed $$m"; done; \
	if [ -n "$$failed" ]; then echo "FAILED modules:$$failed"; exit 1; fi

.PHONY: fault
fault: ## run the fault suite alone (e2e TestFault*: kill -9, SIGSTOP, SIGTERM, Redis and PostgreSQL faults under load; make test runs it under CI=true)
	cd e2e && GATEHOUSE_FAULT=1 go test -count=1 -timeout 15m -run '^TestFault' -v .

.PHONY: bench
bench: build ## req/s, p50/p99 and server CPU per request, embedded and distributed (bench/)
	go run ./bench/cmd/gatehouse-bench -bin ./bin $(BENCH_FLAGS)

.PHONY: bench-scale
# SCALE_USERS and SCALE_TOKENS size the seeded database (defaults: the
# issue's 1 M users and 10 M access and refresh tokens).
SCALE_USERS ?= 1000000
SCALE_TOKENS ?= 10000000
bench-scale: build ## the distributed scenarios on an empty database, then at SCALE_USERS users and SCALE_TOKENS tokens (bench/results/scale.json)
	go run ./bench/cmd/gatehouse-bench -bin ./bin -scale-users $(SCALE_USERS) -scale-tokens $(SCALE_TOKENS) -timeout 90m $(BENCH_FLAGS)

.PHONY: bench-ab
bench-ab: ## interleaved A/B benchmarks of each hand-made piece against the plain path it replaces (bench/results/ab.txt)
	./scripts/bench-ab.sh

.PHONY: bench-compare
bench-compare: ## make bench of OLD=<git ref> and of this tree in turn, ROUNDS pairs: each scenario's ratio to its floor, new over old (bench/results/compare.txt)
	./scripts/bench-compare.sh

.PHONY: bench-go
bench-go: ## run the Go micro-benchmarks of every module
	@for m in $(MODULES); do (cd $$m && go test -run '^$$' -bench . -benchmem ./...); done

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each (default 30s; CI: 3s)
	./scripts/fuzz.sh

.PHONY: vulncheck
vulncheck: ## govulncheck every module against an offline database built from golang.org/x/vulndb
	./scripts/vulncheck.sh

.PHONY: security
security: staticcheck vulncheck ## the static checks CI runs besides lint: staticcheck and govulncheck

.PHONY: staticcheck
staticcheck: ## staticcheck (honnef.co/go/tools, pinned) over every module
	./scripts/staticcheck.sh

.PHONY: lint
lint: ## gofmt and go vet every module
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES); do (cd $$m && go vet ./...); done

# npm install, not npm ci: with this machine's npm settings the lock file
# omits buf's optional per-platform packages, which npm ci then refuses.
node_modules: package.json package-lock.json
	npm install --no-audit --no-fund
	@touch node_modules

# mailpit, the SMTP server of the mail tests, from its own module outside
# go.work (tools/mailpit), so its dependencies never move the services'.
bin/mailpit: tools/mailpit/go.mod tools/mailpit/go.sum
	@mkdir -p bin
	cd tools/mailpit && GOWORK=off go build -o ../../bin/mailpit github.com/axllent/mailpit

.PHONY: mailpit
mailpit: bin/mailpit ## build bin/mailpit, the SMTP test server (e2e mail tests build it themselves)

# oauth2-proxy, the relying party of the e2e email_verified test, likewise
# from its own module (tools/oauth2-proxy).
bin/oauth2-proxy: tools/oauth2-proxy/go.mod tools/oauth2-proxy/go.sum
	cd tools/oauth2-proxy && GOWORK=off go build -o ../../bin/oauth2-proxy github.com/oauth2-proxy/oauth2-proxy/v7

.PHONY: oauth2-proxy
oauth2-proxy: bin/oauth2-proxy ## build bin/oauth2-proxy (the e2e test builds it itself)

PROTOC_PLUGINS := bin/protoc-gen-go bin/protoc-gen-connect-go bin/protoc-gen-openapiv2
$(PROTOC_PLUGINS): pkg/go.mod
	@mkdir -p bin
	go build -o bin/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go
	go build -o bin/protoc-gen-connect-go connectrpc.com/connect/cmd/protoc-gen-connect-go
	go build -o bin/protoc-gen-openapiv2 github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-openapiv2

.PHONY: proto
proto: node_modules $(PROTOC_PLUGINS) ## regenerate pkg/gen and the OpenAPI documents in openapi/ from proto/
	npx buf lint
	rm -rf pkg/gen openapi
	npx buf generate

.PHONY: proto-check
proto-check: node_modules ## fail when committed generated code or OpenAPI documents differ from a fresh generation
	./scripts/proto-check.sh

.PHONY: deploy-check
deploy-check: ## render every kustomize overlay offline and validate it (and skaffold.yaml)
	cd deploy/check && GOWORK=off go test -count=1 ./...

.PHONY: images
images: ## build the four container images (needs a Docker engine)
	@for s in $(SERVICES); do docker build -f deploy/Dockerfile --build-arg SERVICE=$$s -t gatehouse-$$s .; done
