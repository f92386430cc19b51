#!/usr/bin/env bash
# The whole test suite, as `make test` and CI run it. Expects a PostgreSQL server in
# IDEMGEN_TEST_DATABASE_URL (scripts/with-postgres.sh provides one).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go') 2>/dev/null || true)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== generated code is up to date (go generate, then no diff)"
go generate ./...
if git rev-parse --git-dir >/dev/null 2>&1; then
  if ! git diff --exit-code --stat -- examples internal golden; then
    echo "committed generated code differs from what idemgen generates now: run 'make generate' and commit" >&2
    exit 1
  fi
fi

echo "== go vet"
go vet ./...

echo "== go test (unit, golden + compile check, runtime on PostgreSQL, cases, examples)"
IDEMGEN_REQUIRE_DB=1 go test -count=1 -timeout 20m ./...

echo "== the PostgreSQL store's suite again, on the table partitioned by expiry"
IDEMGEN_PG_LAYOUT=partitioned IDEMGEN_REQUIRE_DB=1 go test -count=1 -timeout 20m ./runtime/pgstore/

echo "== benchmark harness, short mode (checks it runs, not how fast)"
log=$(mktemp)
if ! ./bench/run.sh -short >"$log" 2>&1; then cat "$log"; rm -f "$log"; exit 1; fi
rm -f "$log"

echo "== scale benchmark, short mode (20,000 records, both layouts; checks it runs)"
log=$(mktemp)
if ! go run ./bench/cmd/benchscale -short >"$log" 2>&1; then cat "$log"; rm -f "$log"; exit 1; fi
rm -f "$log"

echo "all checks passed"
