#!/usr/bin/env bash
# bench/statements.sh [VARIANT-REGEXP [CONCURRENCY [DURATION]]]
#
# Where the database time goes, statement by statement: run under scripts/with-postgres.sh, it
# turns on pg_stat_statements in the throwaway server (restart), drives the variants whose names
# match VARIANT-REGEXP (default: idemgen's atomic new key and the plain transaction) for DURATION
# at CONCURRENCY, and prints each statement's calls, mean execution and planning time (µs) and
# WAL records and bytes per call. It also saves a 5 s CPU profile of benchserver in
# bench/out/statements-cpu.pprof (go tool pprof bench/out/benchserver bench/out/statements-cpu.pprof).
#
#   scripts/with-postgres.sh bench/statements.sh 'idemgen atomic, new key|plain' 8 5s
set -euo pipefail
cd "$(dirname "$0")/.."
only=${1:-'idemgen atomic, new key|plain'}
conc=${2:-8}
dur=${3:-5s}
: "${DATABASE_URL:?run under scripts/with-postgres.sh}"
: "${IDEMGEN_PG_DATADIR:?run under scripts/with-postgres.sh}"
as_owner=()
[ "$(id -u)" = 0 ] && as_owner=(runuser -u postgres --)

psql "$DATABASE_URL" -qc "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'"
"${as_owner[@]}" "$IDEMGEN_PG_BINDIR/pg_ctl" -D "$IDEMGEN_PG_DATADIR" -w restart >/dev/null
psql "$DATABASE_URL" -qc 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements' \
  -c 'ALTER SYSTEM SET pg_stat_statements.track_planning = on' -c 'SELECT pg_reload_conf()'

out=bench/out
mkdir -p "$out"
go build -o "$out/benchserver" ./bench/cmd/benchserver
go build -o "$out/benchdrive" ./bench/cmd/benchdrive
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
"$out/benchserver" -addr "127.0.0.1:$port" >"$out/statements-server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$port/_effects" && break; sleep 0.1; done
psql "$DATABASE_URL" -qAtc 'SELECT pg_stat_statements_reset()' >/dev/null
(sleep 1; curl -s -o "$out/statements-cpu.pprof" "http://127.0.0.1:$port/debug/pprof/profile?seconds=5") &
prof=$!
wrk=()
command -v wrk >/dev/null && wrk=(-wrk "$(command -v wrk)")
"$out/benchdrive" -url "http://127.0.0.1:$port" -pid "$server" "${wrk[@]}" -only "$only" -concurrency "$conc" -duration "$dur" -rounds 1
wait $prof || true
psql "$DATABASE_URL" -c "SELECT calls,
    round((total_exec_time / calls * 1000)::numeric, 1) AS exec_us,
    round((total_plan_time / calls * 1000)::numeric, 1) AS plan_us,
    round(wal_records::numeric / calls, 1) AS wal_records,
    round(wal_bytes / calls) AS wal_bytes,
    left(regexp_replace(query, '\s+', ' ', 'g'), 100) AS statement
  FROM pg_stat_statements WHERE calls >= 100 AND query NOT LIKE '%pg_stat_statements%'
  ORDER BY total_exec_time + total_plan_time DESC LIMIT 15"
