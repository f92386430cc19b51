#!/usr/bin/env bash
# bench/ab/run.sh [-short] [-rounds N] [-duration D] [-concurrency LIST] [-only REGEXP] [-new REV] [OLD-REV]
#
# A/B of the runtime across revisions, in one run: builds bench/cmd/benchserver of OLD-REV
# (default 1b4cdd7, the last commit before the runtime redesign) in a temporary git worktree,
# and of the working tree (or of -new REV, likewise), starts both on the PostgreSQL in
# DATABASE_URL (scripts/with-postgres.sh starts a throwaway one), each on its own database, and
# drives the same variants against both with this tree's benchdrive in A/B mode (-old-url):
# every variant at every concurrency on both servers back to back in each round, their order
# alternating, wrk as the load generator. Prints, and writes to bench/out/ab.md, req/s, p50/p99,
# server CPU, PostgreSQL CPU, client CPU and round trips per request for both, then the
# per-round ratios new/old (median and range) with a sign test over the rounds. Every pair is
# also appended to bench/out/ab-samples.tsv, so that several runs can be pooled:
#   bench/out/benchdrive -pool bench/out/ab-samples.tsv
# Nothing of the other revision is kept: its worktree is removed when the script ends.
#
#   scripts/with-postgres.sh bench/ab/run.sh                      # HEAD (working tree) against 1b4cdd7
#   scripts/with-postgres.sh bench/ab/run.sh -new 1b4cdd7 1b4cdd7 # A/A: the noise floor
#   scripts/with-postgres.sh bench/ab/run.sh -only 'A/B ClaimWithStatement' 1b4cdd7
#   make bench-ab                                                 # the first one
#
# Defaults: 9 rounds of 1 s, concurrency 1,8,32, the variants "idemgen atomic, new key",
# "idemgen replay" and "idemgen lease, new key" (benchdrive's names; any variant whose route both
# revisions serve can be named with -only). -short: 1 round, concurrency 1,8 (checks that the
# harness works; its figures mean nothing). About 4 minutes with the defaults, plus the build of
# the other revision (10-20 s, less with a warm build cache).
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
short= rounds=9 duration=1s concs=1,8,32 only= newrev= oldrev=1b4cdd7
while [ $# -gt 0 ]; do
  case "$1" in
    -short) short=1 rounds=1 concs=1,8 ;;
    -rounds) rounds="${2:?}"; shift ;;
    -duration) duration="${2:?}"; shift ;;
    -concurrency) concs="${2:?}"; shift ;;
    -only) only="${2:?}"; shift ;;
    -new) newrev="${2:?}"; shift ;;
    -*) echo "usage: bench/ab/run.sh [-short] [-rounds N] [-duration D] [-concurrency LIST] [-only REGEXP] [-new REV] [OLD-REV]" >&2; exit 2 ;;
    *) oldrev="$1" ;;
  esac
  shift
done
: "${DATABASE_URL:?run under scripts/with-postgres.sh (make bench-ab)}"
started=$(date +%s)
out=bench/out
mkdir -p "$out"
tmp=$(mktemp -d /tmp/idemgen-ab.XXXXXX)
pids=()
worktrees=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for w in "${worktrees[@]}"; do git -C "$repo" worktree remove --force "$w" >/dev/null 2>&1 || true; done
  git -C "$repo" worktree prune >/dev/null 2>&1 || true
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT INT TERM

# build REV DEST: DEST is REV's benchserver, built in a detached worktree of REV under $tmp.
build() {
  local rev=$1 dest=$2 src
  src="$tmp/src-$(git -C "$repo" rev-parse --short "$rev^{commit}")-$RANDOM"
  git -C "$repo" worktree add --detach -q "$src" "$rev"
  worktrees+=("$src")
  (cd "$src" && go build -o "$dest" ./bench/cmd/benchserver)
}

oldname=$(git rev-parse --short "$oldrev^{commit}")
echo "bench/ab: building $oldname's benchserver in a temporary worktree" >&2
build "$oldrev" "$tmp/benchserver-old"
if [ -n "$newrev" ]; then
  newname=$(git rev-parse --short "$newrev^{commit}")
  echo "bench/ab: building $newname's benchserver in a temporary worktree" >&2
  build "$newrev" "$tmp/benchserver-new"
else
  newname="$(git rev-parse --short HEAD)"
  [ -z "$(git status --porcelain -- . ':!bench/out')" ] || newname="$newname+changes"
  go build -o "$tmp/benchserver-new" ./bench/cmd/benchserver
fi
[ "$newname" != "$oldname" ] || newname="$newname'"
go build -o "$out/benchdrive" ./bench/cmd/benchdrive

# One database per side on the same server, created afresh.
dburl() { python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$DATABASE_URL" "$1"; }
for db in idemgen_ab_old idemgen_ab_new; do
  psql "$DATABASE_URL" -qAt -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
done

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
# start SIDE: starts $tmp/benchserver-SIDE on database idemgen_ab_SIDE; sets port and pid.
start() {
  local side=$1
  port=$(free_port)
  DATABASE_URL=$(dburl "idemgen_ab_$side") "$tmp/benchserver-$side" -addr "127.0.0.1:$port" -conns 64 >"$out/ab-benchserver-$side.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 1 150); do
    curl -s -o /dev/null "http://127.0.0.1:$port/_bench/postmaster" && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "bench/ab: the $side benchserver did not start; its log:" >&2
  cat "$out/ab-benchserver-$side.log" >&2
  exit 1
}
start old; oldport=$port oldpid=$pid
start new; newport=$port newpid=$pid

wrk=$(command -v wrk || true)
if [ -z "$wrk" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "bench/ab: installing wrk (apt-get install wrk)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null 2>&1; } || true
  wrk=$(command -v wrk || true)
fi
drive=("$out/benchdrive" -url "http://127.0.0.1:$newport" -pid "$newpid" -name "$newname"
  -old-url "http://127.0.0.1:$oldport" -old-pid "$oldpid" -old-name "$oldname"
  -rounds "$rounds" -duration "$duration" -concurrency "$concs" -samples "$out/ab-samples.tsv")
[ -z "$only" ] || drive+=(-only "$only")
if [ -n "$wrk" ]; then
  drive+=(-wrk "$wrk")
elif [ -z "$short" ]; then
  echo "bench/ab: wrk not found; install the Debian package wrk (apt-get install wrk)" >&2
  exit 1
else
  echo "bench/ab: wrk not found; the short mode uses the Go load generator" >&2
fi

load0=$(cut -d' ' -f1-3 /proc/loadavg)
"${drive[@]}" | tee "$out/ab.md"
{
  echo
  echo "Run: $(date -u +%Y-%m-%dT%H:%MZ), $(( $(date +%s) - started )) s; load average at the start $load0, at the end $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $(go version | cut -d' ' -f3); PostgreSQL $(psql "$DATABASE_URL" -Atc 'SHOW server_version' | cut -d' ' -f1), one database per side."
} | tee -a "$out/ab.md"
