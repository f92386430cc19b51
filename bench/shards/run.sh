#!/usr/bin/env bash
# bench/shards/run.sh [-short] [N...] [-- BENCHSHARDS_FLAGS...]
#
# Starts as many throwaway PostgreSQL servers as the largest N (scripts/with-postgres.sh, once
# per server: each its own folder, port and postmaster, as the postgres user when run as root),
# then runs bench/cmd/benchshards over the first N of them for each N: new keys routed to a
# shard by the tenant's scope digest, per-shard WAL, WAL syncs and PostgreSQL CPU per new key,
# and the check that each shard's share of requests is its share of tenants (docs/capacity.md,
# "Checked locally"). Loopback only; every server is stopped and deleted at the end.
#
#   bench/shards/run.sh 1 2 4                    # make bench-shards: 10 s per run
#   bench/shards/run.sh 1 2 4 -- -duration 3s    # shorter runs
#   bench/shards/run.sh -short                   # CI's smoke mode: 1 and 2 servers, a few seconds
#
# The Markdown table goes to stdout and to bench/out/shards.md (not with -short).
set -euo pipefail
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/../.."

# Nested call: with-postgres.sh started one more server; add its URL and start the next.
if [ "${1:-}" = --nest ]; then
  shift
  IDEMGEN_SHARD_URLS="${IDEMGEN_SHARD_URLS:+$IDEMGEN_SHARD_URLS }$DATABASE_URL"
  export IDEMGEN_SHARD_URLS
  left=$1; shift
  if [ "$left" -gt 1 ]; then
    exec ./scripts/with-postgres.sh "$self" --nest $((left - 1)) "$@"
  fi
  exec "$@"
fi

short=
counts=()
while [ $# -gt 0 ]; do
  case "$1" in
    -short) short=1 ;;
    --) shift; break ;;
    *[!0-9]* | '') echo "usage: bench/shards/run.sh [-short] [N...] [-- BENCHSHARDS_FLAGS...]" >&2; exit 2 ;;
    *) counts+=("$1") ;;
  esac
  shift
done
[ -n "$short" ] && counts=(1 2)
[ ${#counts[@]} -gt 0 ] || counts=(1 2 4)
max=0
for n in "${counts[@]}"; do
  [ "$n" -ge 1 ] || { echo "bench/shards/run.sh: a shard count is at least 1" >&2; exit 2; }
  [ "$n" -gt "$max" ] && max=$n
done
list=$(IFS=,; echo "${counts[*]}")

# Build once, outside the servers' lifetime, so that compiling does not overlap the runs.
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/benchshards" ./bench/cmd/benchshards

args=(-shards "$list")
[ -n "$short" ] && args=(-short)
unset IDEMGEN_SHARD_URLS
if [ -n "$short" ]; then
  ./scripts/with-postgres.sh "$self" --nest "$max" "$bin/benchshards" "${args[@]}" "$@"
else
  mkdir -p bench/out
  ./scripts/with-postgres.sh "$self" --nest "$max" "$bin/benchshards" "${args[@]}" "$@" | tee bench/out/shards.md
fi
