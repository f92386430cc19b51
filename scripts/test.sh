#!/usr/bin/env bash
# The whole test suite, as `make test` and CI run it. Expects a PostgreSQL server in
# IDEMGEN_TEST_DATABASE_URL (scripts/with-postgres.sh provides one), Redis, standalone in
# IDEMGEN_TEST_REDIS_ADDR and a 3-master cluster in IDEMGEN_TEST_REDIS_CLUSTER
# (scripts/with-redis.sh provides both), and PgBouncer in transaction pooling mode in front of
# the PostgreSQL server in IDEMGEN_TEST_PGBOUNCER_URL (scripts/with-pgbouncer.sh); with
# IDEMGEN_REQUIRE_DB=1 and IDEMGEN_REQUIRE_PGBOUNCER=1, a test that needs one of them fails
# rather than skips when it is missing. Installs, from Debian's packages and only when they
# are missing, Chromium (the admin page's browser test), promtool (the alert rules' tests) and
# valgrind (bench/guard's instruction count); with them present those tests may not skip.
# They are installed system-wide, with their dependencies (Chromium's are about 300 MB).
set -euo pipefail
cd "$(dirname "$0")/.."

# apt_install PKG...: Debian packages, waiting for another apt-get's or dpkg's lock.
. scripts/apt.sh

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go') 2>/dev/null || true)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

# The example modules (examples/*/go.mod: oapi-codegen, ogen, chi, ...), the framework adapters
# (adapters/*/go.mod: echo, gin, fiber, fiberv3, huma), the adapters' benchmark server (bench/frameworks) and
# the test of every way in (internal/testkit/stacks: TestEveryWayIn) are
# modules of their own, with a replace of github.com/idemgen/idemgen to this checkout, so the
# main module does not depend on their frameworks; ./... does not reach them, and each step
# below runs in each of them too.
example_modules=$(for m in adapters/*/go.mod bench/frameworks/go.mod examples/*/go.mod internal/testkit/stacks/go.mod; do [ -f "$m" ] && dirname "$m"; done)
# The glob picks up a new module by itself; these must never drop out of CI unnoticed.
for d in adapters/echo adapters/fiber adapters/fiberv3 adapters/gin adapters/huma bench/frameworks internal/testkit/stacks examples/chi examples/echo examples/fiber examples/gin examples/huma examples/oapi-codegen examples/ogen examples/sdk-client examples/stripe examples/svix examples/twilio; do
  case " $(echo $example_modules) " in
    *" $d "*) ;;
    *) echo "$d/go.mod is missing: CI would no longer run that example module's tests" >&2; exit 1 ;;
  esac
done

echo "== generated code is up to date (go generate, then no diff)"
go generate ./...
for d in $example_modules; do (cd "$d" && go generate ./...); done
if git rev-parse --git-dir >/dev/null 2>&1; then
  if ! git diff --exit-code --stat -- adapters examples internal golden; then
    echo "committed generated code differs from what idemgen generates now: run 'make generate' and commit" >&2
    exit 1
  fi
fi

echo "== adapter and example modules are tidy (a dependency changed at the root needs go mod tidy there too)"
for d in $example_modules; do
  if ! (cd "$d" && go mod tidy -diff); then
    echo "$d/go.mod or go.sum is not tidy: run (cd $d && go mod tidy) and commit" >&2
    exit 1
  fi
done

echo "== go vet"
go vet ./...
for d in $example_modules; do (cd "$d" && go vet ./...); done

echo "== public API against the last release point (scripts/apicheck: an incompatible change must be marked in CHANGELOG.md)"
(cd scripts/apicheck && go vet ./... && go mod tidy -diff && go test -count=1 ./... && go run . -repo ../..)

echo "== tools: Chromium (admin page test), promtool (alert rules), valgrind (the request-cost guard's instruction count)"
missing=()
command -v "${IDEMGEN_CHROMIUM:-chromium}" >/dev/null 2>&1 || missing+=(chromium)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} from Debian's packages"
  apt_install "${missing[@]}"
fi
export IDEMGEN_REQUIRE_BROWSER=1 IDEMGEN_REQUIRE_PROMTOOL=1 IDEMGEN_REQUIRE_VALGRIND=1

echo "== alert rules (promtool check rules, promtool test rules)"
promtool check rules docs/monitoring/alerts.yaml
promtool test rules docs/monitoring/alerts_test.yaml

echo "== the Node.js examples' packages (examples/express, examples/nestjs: npm ci from package-lock.json)"
if command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
  (cd examples/express && npm ci --no-audit --no-fund --loglevel=error)
  (cd examples/nestjs && npm ci --no-audit --no-fund --loglevel=error)
  export IDEMGEN_REQUIRE_NODE=1
else
  echo "node and npm are not installed: examples/express and examples/nestjs (idemgen conform against express-idempotency and @node-idempotency/nestjs) skip"
fi

export IDEMGEN_REQUIRE_PGBOUNCER=1

echo "== go test (unit, golden + compile check, runtime on PostgreSQL and Redis, cases, examples)"
IDEMGEN_REQUIRE_DB=1 go test -count=1 -timeout 20m $(go list ./... | grep -v '/internal/testkit/faults$')

echo "== fault-injection suite, short mode (internal/testkit/faults; make faults runs the long mode)"
# Alone, after the rest: its scenarios measure timings. Its figures are printed; on failure, all of it.
log=$(mktemp)
if ! IDEMGEN_REQUIRE_DB=1 go test -short -count=1 -v -timeout 10m ./internal/testkit/faults >"$log" 2>&1; then
  cat "$log"; rm -f "$log"; exit 1
fi
awk '/faults: /{p=1; sub(/^ *[a-z_]+_test\.go:[0-9]+: /, ""); print; next} p && /^          /{print; next} {p=0}' "$log"
grep -E '^(ok|---)' "$log" || true
rm -f "$log"

echo "== behind PgBouncer (transaction pooling): the store suite, the request cases, the fault suite's short mode"
# Every database of these runs is reached through the pooler (internal/testkit/pgtest); the
# fault suite's scenarios that start servers of their own, or set startup parameters PgBouncer
# refuses, ran above only.
via=(env IDEMGEN_TEST_VIA_PGBOUNCER=1 IDEMGEN_REQUIRE_DB=1)
"${via[@]}" go test -count=1 -timeout 10m -run '^(TestStoreSuite|TestTransactionalSuite)$' ./runtime/pgstore/
"${via[@]}" go test -count=1 -timeout 10m -run '^TestCases$' ./internal/testkit/conformance/
log=$(mktemp)
if ! "${via[@]}" go test -short -count=1 -v -timeout 10m \
    -run '^(TestStorm|TestKillAtomic|TestKillLease|TestLeaseExpiry|TestSlowBodies|TestTerminatedInHandler)$' \
    ./internal/testkit/faults >"$log" 2>&1; then
  cat "$log"; rm -f "$log"; exit 1
fi
grep -E '^(ok|---)' "$log" || true
rm -f "$log"

echo "== adapter and example modules: go test (their services run the cases on PostgreSQL)"
for d in $example_modules; do
  echo "-- $d"
  (cd "$d" && IDEMGEN_REQUIRE_DB=1 go test -count=1 -timeout 10m ./...)
done

echo "== the PostgreSQL store's suite again, on the table partitioned by expiry"
IDEMGEN_PG_LAYOUT=partitioned IDEMGEN_REQUIRE_DB=1 go test -count=1 -timeout 20m ./runtime/pgstore/

echo "== benchmark harness, short mode (checks it runs, not how fast)"
log=$(mktemp)
if ! ./bench/run.sh -short >"$log" 2>&1; then cat "$log"; rm -f "$log"; exit 1; fi
rm -f "$log"

echo "== the floor of a new key, short mode (bench/floor.sh: floor variants and bytes per record; checks it runs)"
log=$(mktemp)
if ! ./bench/floor.sh -short >"$log" 2>&1; then cat "$log"; rm -f "$log"; exit 1; fi
rm -f "$log"

echo "== framework adapters' benchmark, short mode (bench/frameworks; checks it runs)"
log=$(mktemp)
if ! ./bench/frameworks/run.sh -short >"$log" 2>&1; then cat "$log"; rm -f "$log"; exit 1; fi
rm -f "$log"

echo "== scale benchmark, short mode (20,000 records, both layouts; checks it runs)"
log=$(mktemp)
if ! go run ./bench/cmd/benchscale -short >"$log" 2>&1; then cat "$log"; rm -f "$log"; exit 1; fi
rm -f "$log"

echo "== tombstones benchmark, short mode (20,000 tombstones; checks it runs)"
log=$(mktemp)
if ! go run ./bench/cmd/benchtombstones -short >"$log" 2>&1; then cat "$log"; rm -f "$log"; exit 1; fi
rm -f "$log"

echo "== reconciliation benchmark, short mode (20,000 records, 5,000 report lines; checks it runs and finds what it planted)"
log=$(mktemp)
if ! go run ./bench/cmd/benchreconcile -short >"$log" 2>&1; then cat "$log"; rm -f "$log"; exit 1; fi
rm -f "$log"

echo "== shards benchmark, short mode (1 and 2 throwaway PostgreSQL servers, new keys routed by scope digest; checks each shard's share)"
log=$(mktemp)
if ! ./bench/shards/run.sh -short >"$log" 2>&1; then cat "$log"; rm -f "$log"; exit 1; fi
rm -f "$log"

echo "all checks passed"
