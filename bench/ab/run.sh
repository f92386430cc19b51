#!/usr/bin/env bash
# bench/ab/run.sh [-short] [-no-counts] [-rounds N] [-duration D] [-concurrency LIST] [-only REGEXP] [-new REV] [OLD-REV]
# bench/ab/run.sh -peer [-short] [-rounds N] [-duration D] [-concurrency LIST] [-only REGEXP]
#
# A/B of the runtime across revisions, in one run. First the request-cost counts of both
# (bench/ab/counts.sh: allocations, statements, round trips and a replay's instructions per
# request, which the machine's load does not move; -no-counts skips them, -short too). Then it
# builds bench/cmd/benchserver of OLD-REV
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
#   make bench-ab REV=c79593f                                     # the working tree against c79593f
#   make bench-ab REV=c79593f NEW=main                            # main against c79593f
#
# Defaults: 9 rounds of 1 s, concurrency 1,8,32, the variants "idemgen atomic, new key",
# "idemgen replay" and "idemgen lease, new key" (benchdrive's names; any variant whose route both
# revisions serve can be named with -only: one that either answers 404 or 405 is left out, with a
# note, as the middleware's are against 1b4cdd7; the Redis variants are never run). -short: 1 round, concurrency 1,8 (checks that the
# harness works; its figures mean nothing). About 4 minutes with the defaults, plus the build of
# the other revision (10-20 s, less with a warm build cache).
#
# -peer: the old side is not a revision but the best Go peer, idemlease v1.1.0 (bench/peer: its
# httpidem middleware on its PostgreSQL store, serving the route of the "A/B ClaimWithStatement"
# variants), against the working tree's benchserver; PEER_DIR=DIR builds the peer from an
# extracted tree of its public source where the Go module proxy refuses it (bench/README.md,
# "The peer"). No counts (the peer has no request-cost scenarios); by default the variants
# "A/B ClaimWithStatement, replay" and ", new key" (the peer answers 404 on every other
# route: left out, with a note) at concurrency 8 and 32, 9 rounds (`make bench-peer`); with
# -short 1 round of 1 s at 8 and 32, a smoke run of some 30 s whose figures mean little.
# Writes bench/out/peer.md and appends to bench/out/peer-samples.tsv (benchdrive -pool reads it).
#
#   PEER_DIR=/tmp/idemlease scripts/with-postgres.sh bench/ab/run.sh -peer -short
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
short= counts=1 rounds=9 duration=1s concs=1,8,32 only= newrev= oldrev=1b4cdd7 peer=
for a in "$@"; do
  # -peer first, so that -short and -concurrency after it or before it mean the same
  if [ "$a" = -peer ]; then peer=1 counts= concs=8,32 only='^A/B ClaimWithStatement, (replay|new key)$'; fi
done
while [ $# -gt 0 ]; do
  case "$1" in
    -peer) ;;
    -short) short=1 counts= rounds=1; [ -n "$peer" ] || concs=1,8 ;;
    -no-counts) counts= ;;
    -rounds) rounds="${2:?}"; shift ;;
    -duration) duration="${2:?}"; shift ;;
    -concurrency) concs="${2:?}"; shift ;;
    -only) only="${2:?}"; shift ;;
    -new) newrev="${2:?}"; shift ;;
    -*) echo "usage: bench/ab/run.sh [-peer] [-short] [-no-counts] [-rounds N] [-duration D] [-concurrency LIST] [-only REGEXP] [-new REV] [OLD-REV]" >&2; exit 2 ;;
    *) oldrev="$1" ;;
  esac
  shift
done
: "${DATABASE_URL:?run under scripts/with-postgres.sh (make bench-ab)}"
if [ -n "$counts" ]; then
  bench/ab/counts.sh ${newrev:+-new "$newrev"} "$oldrev"
  echo
fi
started=$(date +%s)
out=bench/out
mkdir -p "$out"
. bench/ab/lib.sh
report=ab # bench/out/ab.md and ab-samples.tsv; peer.md and peer-samples.tsv with -peer (pooled apart)
if [ -n "$peer" ]; then
  report=peer
  [ -z "$newrev" ] || { echo "bench/ab: -peer measures the working tree; -new does not apply" >&2; exit 2; }
  build_peer
else
  build_sides "$oldrev" "$newrev"
fi
start_side old
start_side new
find_wrk
drive=("$out/benchdrive" -url "http://127.0.0.1:$newport" -pid "$newpid" -name "$newname"
  -old-url "http://127.0.0.1:$oldport" -old-pid "$oldpid" -old-name "$oldname"
  -rounds "$rounds" -duration "$duration" -concurrency "$concs" -samples "$out/$report-samples.tsv")
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
"${drive[@]}" | tee "$out/$report.md"
{
  echo
  echo "Run: $(date -u +%Y-%m-%dT%H:%MZ), $(( $(date +%s) - started )) s; load average at the start $load0, at the end $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $(go version | cut -d' ' -f3); PostgreSQL $(psql "$DATABASE_URL" -Atc 'SHOW server_version' | cut -d' ' -f1), one database per side."
} | tee -a "$out/$report.md"
