# idemgen — make targets. `make help` lists them.
GO ?= go
BIN := bin/idemgen

.PHONY: help build generate test test-citus quickstart api-check faults bench bench-short bench-floor bench-ab bench-replay bench-peer bench-scale bench-tombstones bench-reconcile bench-stripe bench-frameworks bench-shards fuzz fuzz-adapters demo clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-17s %s\n", $$1, $$2}'

build: ## build bin/idemgen
	$(GO) build -o $(BIN) ./cmd/idemgen

generate: ## regenerate every generated file, then fail if committed output changed
	$(GO) generate ./...
	for m in adapters/*/go.mod examples/*/go.mod; do (cd $$(dirname $$m) && $(GO) generate ./...) || exit 1; done
	$(GO) test ./generator -run TestGolden -update
	@if [ -n "$$(git status --porcelain -- adapters golden examples internal)" ]; then \
		git status --short -- adapters golden examples internal >&2; \
		echo "generated output changed (or is new): review and commit it" >&2; exit 1; fi

test: ## run every test against a throwaway PostgreSQL, Redis (standalone + 3-master cluster) and PgBouncer (transaction pooling): the README's test command
	./scripts/with-postgres.sh ./scripts/with-redis.sh ./scripts/with-pgbouncer.sh ./scripts/test.sh

test-citus: ## the store on Citus: storetest's suites, the Citus tests, storms, sweeper, reconciliation and the request cases, against CITUS_URL or a throwaway coordinator and 2 workers (Citus must be installed: docs/distributed.md; not CI)
	./scripts/test-citus.sh

quickstart: ## run README.md's "Five minutes" steps 2 and 3, as written, in a fresh module beside this checkout (about a minute; needs the Go module proxy or a warm cache)
	./scripts/quickstart.sh

faults: ## the fault-injection suite in long mode (minutes; CI runs its short mode), with its figures
	IDEMGEN_FAULTS=long ./scripts/with-postgres.sh $(GO) test -count=1 -v -timeout 60m ./internal/testkit/faults

api-check: ## compare the public Go API with CHANGELOG.md's last release point; fail on an unmarked breaking change
	cd scripts/apicheck && $(GO) run . -repo ../..

bench: ## run the full benchmark harness and rewrite bench/README.md tables
	./scripts/with-postgres.sh ./scripts/with-redis.sh ./bench/run.sh

bench-short: ## the benchmark harness in short mode (checks it runs, not how fast)
	./scripts/with-postgres.sh ./scripts/with-redis.sh ./bench/run.sh -short

bench-floor: ## a new key against the floor (plain transaction + a record row) and the plain transaction, side by side, and bytes per record (not CI: about 4 minutes); writes bench/out/floor.md
	./scripts/with-postgres.sh ./bench/floor.sh

bench-ab: ## A/B two revisions in one run: REV=rev (OLD= too; default 1b4cdd7) against the working tree, or against NEW=rev: request-cost counts (allocations, statements, instructions), then wrk rounds side by side
	./scripts/with-postgres.sh ./bench/ab/run.sh $(if $(NEW),-new $(NEW)) $(or $(REV),$(OLD))

bench-replay: ## issue 41's table on a quiet machine: replay, new key (Limits.Records off) and the plain transaction at c=8 and 32, the working tree against c79593f, the revision issue 41 measured (REV= another), side by side, counts first (about 3 minutes); writes bench/out/ab.md and ab-counts.md
	./scripts/with-postgres.sh ./bench/ab/run.sh -only '^(A/B ClaimWithStatement, (replay|new key)|plain transaction \(no idempotency\))$$' -concurrency 8,32 -rounds 9 $(or $(REV),c79593f)

bench-peer: ## idemgen's replay and new key against the best Go peer, idemlease v1.1.0 (bench/peer: its httpidem on its pgstore), side by side at c=8 and 32, 9 rounds (about 2 minutes): req/s, server and PostgreSQL CPU, ratios idemgen/peer; PEER_DIR= an extracted tree of the peer where the Go module proxy refuses it (bench/README.md, "The peer"); SHORT=1 a smoke run; writes bench/out/peer.md
	$(if $(PEER_DIR),PEER_DIR=$(abspath $(PEER_DIR))) ./scripts/with-postgres.sh ./bench/ab/run.sh -peer $(if $(SHORT),-short)

bench-scale: ## the store at 10 million records, both layouts (not CI: about 15 minutes on 2 cores); writes bench/out/scale.md
	mkdir -p bench/out
	./scripts/with-postgres.sh go run ./bench/cmd/benchscale -records 10000000 | tee bench/out/scale.md

bench-tombstones: ## tombstones at 10 million: bytes per tombstone, a new key with and without one, lookups, the sweeper's cost (not CI: about 15 minutes on 2 cores); writes bench/out/tombstones.md
	mkdir -p bench/out
	./scripts/with-postgres.sh go run ./bench/cmd/benchtombstones -tombstones 10000000 | tee bench/out/tombstones.md

bench-reconcile: ## reconciliation of a 1,000,000-line provider report against 10,000,000 records (not CI: about 25 minutes on this machine, most of it the fill); writes bench/out/reconcile.md
	mkdir -p bench/out
	./scripts/with-postgres.sh go run ./bench/cmd/benchreconcile -records 10000000 -lines 1000000 | tee bench/out/reconcile.md

bench-stripe: ## Stripe's spec with every POST marked: generate and cold-cache go build time, peak RSS, lines (bench/stripe/run.sh)
	./bench/stripe/run.sh

bench-frameworks: ## the echo, gin, fiber and Huma adapters against the net/http middleware and the generated handler, new key and replay at c=8,32 (about 3 minutes); writes bench/out/frameworks.md
	./scripts/with-postgres.sh ./bench/frameworks/run.sh

bench-shards: ## new keys over 1, 2 and 4 throwaway PostgreSQL servers sharded by scope digest: per-shard WAL, syncs and CPU per new key (about 1 minute); writes bench/out/shards.md
	./bench/shards/run.sh 1 2 4

FUZZTIME ?= 60s
fuzz-adapters: ## the adapters' differential fuzzers: echo's, gin's, fiber's (v2, v3) and Huma's JSON and form binders against the strict decoder, 60 s each (FUZZTIME=)
	for m in adapters/echo adapters/gin adapters/fiber adapters/fiberv3 adapters/huma; do for f in FuzzBindJSON FuzzBindForm; do \
		(cd $$m && $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) .) || exit 1; done; done

# Every fuzzer, as package:Name. Their seed corpora run as plain tests in `make test` (CI's short
# mode); `make fuzz` mutates each for FUZZTIME.
FUZZERS := \
	./golden/conformance:FuzzReencodedBody \
	./golden/form:FuzzReencodedForm \
	./golden/multipart:FuzzReencodedMultipart \
	./golden/conformance:FuzzCreatePaymentBody \
	./runtime/canonical:FuzzCanonical \
	./runtime/canonical:FuzzVariants \
	./runtime/canonical:FuzzForm \
	./runtime/gen:FuzzFormTree \
	./runtime/gen:FuzzMultipart \
	./internal/spec:FuzzLoad

fuzz: ## run every fuzzer for FUZZTIME each (default 60s): the middleware's differential fuzzers first, the adapters' (fuzz-adapters) last
	@set -e; for f in $(FUZZERS); do \
		pkg=$${f%%:*}; name=$${f##*:}; echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done
	$(MAKE) fuzz-adapters FUZZTIME=$(FUZZTIME)

demo: build ## list and generate the petstore, serve it on a throwaway PostgreSQL, show the four answers
	./scripts/with-postgres.sh ./scripts/demo.sh

clean: ## remove build output
	rm -rf bin
