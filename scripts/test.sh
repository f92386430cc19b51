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

echo "== go vet"
go vet ./...

echo "== go test (unit, golden, runtime on PostgreSQL, cases, examples)"
IDEMGEN_REQUIRE_DB=1 go test -count=1 -timeout 20m ./...
