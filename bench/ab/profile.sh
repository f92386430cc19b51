#!/usr/bin/env bash
# bench/ab/profile.sh [-only REGEXP] [-concurrency C] [-duration D] [-new REV] [OLD-REV]
#
# Where an A/B difference goes: builds and starts the two benchservers as bench/ab/run.sh does
# (OLD-REV, default 1b4cdd7, against the working tree or -new REV; same PostgreSQL, one database
# each), turns on pg_stat_statements (a restart of the throwaway server, as bench/statements.sh
# does), then drives the variants whose names match REGEXP (default: idemgen's atomic new key)
# at concurrency C (default 8) for D (default 20s) on one server after the other while taking
# a CPU profile and an allocation profile of it. Writes bench/out/ab-{old,new}.pprof and
# ab-{old,new}-allocs.pprof and prints, per side, benchdrive's table, the CPU profile's top
# functions and the allocations by function, and per statement (pg_stat_statements by database) the
# calls, mean execution and planning time and WAL. Compare the profiles with
#   go tool pprof -top -diff_base bench/out/ab-old.pprof bench/out/ab-new.pprof
#
#   scripts/with-postgres.sh bench/ab/profile.sh -only 'idemgen atomic, new key' -concurrency 8
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
only='^idemgen atomic, new key$' conc=8 duration=20s newrev= oldrev=1b4cdd7
while [ $# -gt 0 ]; do
  case "$1" in
    -only) only="${2:?}"; shift ;;
    -concurrency) conc="${2:?}"; shift ;;
    -duration) duration="${2:?}"; shift ;;
    -new) newrev="${2:?}"; shift ;;
    -*) echo "usage: bench/ab/profile.sh [-only REGEXP] [-concurrency C] [-duration D] [-new REV] [OLD-REV]" >&2; exit 2 ;;
    *) oldrev="$1" ;;
  esac
  shift
done
: "${DATABASE_URL:?run under scripts/with-postgres.sh}"
: "${IDEMGEN_PG_DATADIR:?run under scripts/with-postgres.sh}"
out=bench/out
mkdir -p "$out"
. bench/ab/lib.sh
build_sides "$oldrev" "$newrev"

as_owner=()
[ "$(id -u)" = 0 ] && as_owner=(runuser -u postgres --)
psql "$DATABASE_URL" -qc "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'"
"${as_owner[@]}" "$IDEMGEN_PG_BINDIR/pg_ctl" -D "$IDEMGEN_PG_DATADIR" -w restart >/dev/null
psql "$DATABASE_URL" -qc 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements' \
  -c 'ALTER SYSTEM SET pg_stat_statements.track_planning = on' -c 'SELECT pg_reload_conf()' >/dev/null

start_side old
start_side new
find_wrk
wrkflag=()
[ -z "$wrk" ] || wrkflag=(-wrk "$wrk")
secs=${duration%s}
psql "$DATABASE_URL" -qAtc 'SELECT pg_stat_statements_reset()' >/dev/null
for side in old new; do
  port=${side}port pid=${side}pid
  name=$oldname
  [ "$side" = old ] || name=$newname
  echo "== $side ($name): $only at c=$conc for $duration, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  # the profiles start a second into the load and end before it
  (sleep 1; curl -s -o "$out/ab-$side.pprof" "http://127.0.0.1:${!port}/debug/pprof/profile?seconds=$((secs - 2))") &
  prof=$!
  (sleep 1; curl -s -o "$out/ab-$side-allocs.pprof" "http://127.0.0.1:${!port}/debug/pprof/allocs?seconds=$((secs - 2))") &
  allocs=$!
  "$out/benchdrive" -url "http://127.0.0.1:${!port}" -pid "${!pid}" "${wrkflag[@]}" -only "$only" \
    -concurrency "$conc" -duration "$duration" -rounds 1 -storm 0 | sed -n '/^| variant/,/^$/p'
  wait $prof $allocs || true
  echo
  go tool pprof -top -nodecount=30 "$out/ab-$side.pprof" 2>/dev/null | sed -n '1,40p'
  echo
  echo "allocations (objects) by function, cumulative:"
  go tool pprof -top -cum -sample_index=alloc_objects -nodecount=40 "$out/ab-$side-allocs.pprof" 2>/dev/null | sed -n '5,50p'
  echo
done
echo "== pg_stat_statements by database (old: idemgen_ab_old, new: idemgen_ab_new)"
psql "$DATABASE_URL" -c "SELECT d.datname AS db, calls,
    round((total_exec_time / calls * 1000)::numeric, 1) AS exec_us,
    round((total_plan_time / calls * 1000)::numeric, 1) AS plan_us,
    round(rows::numeric / calls, 2) AS rows,
    round(wal_records::numeric / calls, 1) AS wal_recs,
    round(wal_bytes / calls) AS wal_bytes,
    left(regexp_replace(query, '\s+', ' ', 'g'), 90) AS statement
  FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
  WHERE calls >= 100 AND d.datname LIKE 'idemgen_ab_%'
  ORDER BY statement, db"
echo
echo "go tool pprof -top -diff_base $out/ab-old.pprof $out/ab-new.pprof:"
go tool pprof -top -nodecount=30 -diff_base "$out/ab-old.pprof" "$out/ab-new.pprof" 2>/dev/null | sed -n '1,40p'
echo
echo "Allocation profiles: $out/ab-old-allocs.pprof and $out/ab-new-allocs.pprof (go tool pprof -sample_index=alloc_objects)."
