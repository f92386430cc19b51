#!/usr/bin/env bash
# test-citus.sh: the store on a Citus coordinator (make test-citus; docs/distributed.md). With
# CITUS_URL set (a coordinator's database with the citus extension and its workers registered),
# it runs there; without it, on a throwaway cluster of scripts/with-citus.sh (a coordinator and
# two workers on loopback; Citus must be installed: see that script). Each test makes a database
# of its own on every node (internal/testkit/pgtest) and distributes the store's tables in it
# (pgstore.MigrateDistributed). It runs storetest's suites for every claim strategy offered on
# Citus, the Citus tests (lock placement, 50 concurrent duplicates, waits, refused options,
# stored bytes, the statement guard), the storms, the sweeper and reconciliation, and the
# shared request cases through the conformance service (atomic and lease modes).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CITUS_URL:-}" ]; then
  exec ./scripts/with-citus.sh "$0" "$@"
fi
export IDEMGEN_TEST_DATABASE_URL="$CITUS_URL" IDEMGEN_REQUIRE_DB=1
pgstore='^(TestStoreSuite|TestTransactionalSuite|TestCitus.*|TestStatementsCitusPlans|TestAtomicStormOneWrite|TestAtomicConflictDoesNotWait|TestAtomicBoundedWaitReplays|TestAtomicDistinctKeysInParallel|TestLeaseNewConflictReplay|TestLeaseStormOneWrite|TestLeaseTakeoverFencesZombie|TestLeaseExtend|TestLeaseBoundedWaitReplays|TestExpiredRecordIsAbsent|TestSweeper|TestSweeperRun|TestCallLog|TestResolve|TestSweepCalls|TestInspect)$'
echo "== runtime/pgstore on Citus"
# The verbose output, filtered to the tests' names, verdicts and the Citus tests' figures; the
# step fails when go test does (under pipefail a `|| true` after the pipe would hide that).
status=0
go test -count=1 -timeout 60m -v -run "$pgstore" ./runtime/pgstore/ > "${TMPDIR:-/tmp}/idemgen-citus-pgstore.$$" 2>&1 || status=$?
grep -E '^(=== RUN|---|\s+---|PASS|FAIL|ok)|citus_test|storm' "${TMPDIR:-/tmp}/idemgen-citus-pgstore.$$" || true
rm -f "${TMPDIR:-/tmp}/idemgen-citus-pgstore.$$"
if [ "$status" != 0 ]; then
  echo "test-citus: runtime/pgstore failed on Citus (exit $status)" >&2
  exit "$status"
fi
echo "== the shared request cases on Citus (internal/testkit/conformance)"
go test -count=1 -timeout 60m -run '^TestCases$' ./internal/testkit/conformance/
