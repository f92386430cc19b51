#!/usr/bin/env bash
# bench/run.sh [-short] [-only REGEXP]
#
# Runs the whole benchmark harness against the PostgreSQL in DATABASE_URL (make bench starts a
# throwaway one) and, when IDEMGEN_TEST_REDIS_ADDR names a standalone Redis (make bench starts
# one with scripts/with-redis.sh), the Redis store's variants too; writes the results to
# bench/out/:
#   http.md       HTTP end to end: idemgen's paths and the baselines, interleaved over rounds,
#                 ratios, round trips, CPU per request, the same-key storm (bench/cmd/benchdrive)
#   canonical.md  canonical form + fingerprint against generic baselines (the typed path in
#                 golden/conformance, the generic canonicalizer in bench/canonical)
#   load.txt      loading Stripe's spec with every POST marked (bench/load/run.sh)
#   generate.txt  generating Go for it (bench/generate/run.sh)
#   summary.md    all of the above with the machine line
# Without -short it also replaces the part of bench/README.md between the "results:start" and
# "results:end" markers with summary.md. -short is the smoke mode CI runs: every part of the HTTP
# harness runs briefly (the storm still checks one execution and no 5xx), so the harness cannot
# rot; its figures mean nothing, and the slow spec benchmarks are skipped.
# -only REGEXP measures only the HTTP variants whose names match (benchdrive -only; the ratio rows
# need both of their variants), in the full mode's rounds (-short -only: the short mode's), and
# stops there: no storm, no other part (the storm only when REGEXP names it), bench/README.md
# untouched. For example, the middleware against the generated handler:
#   scripts/with-postgres.sh bench/run.sh -only 'middleware|A/B ClaimWithStatement'
# and the Redis section of bench/README.md:
#   scripts/with-postgres.sh scripts/with-redis.sh bench/run.sh -only 'bare|^idemgen (replay|lease|atomic, new key)|Redis|storm'
set -euo pipefail
cd "$(dirname "$0")/.."
short=
only=
while [ $# -gt 0 ]; do
  case "$1" in
    -short) short=1 ;;
    -only) only="${2:?-only needs a regexp}"; shift ;;
    *) echo "usage: bench/run.sh [-short] [-only REGEXP]" >&2; exit 2 ;;
  esac
  shift
done
: "${DATABASE_URL:?run under scripts/with-postgres.sh (make bench)}"
started=$(date +%s)
out=bench/out
mkdir -p "$out"
go build -o "$out/benchserver" ./bench/cmd/benchserver
go build -o "$out/benchdrive" ./bench/cmd/benchdrive
go build -o "$out/benchsum" ./bench/cmd/benchsum

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
"$out/benchserver" -addr "127.0.0.1:$port" -conns 64 -redis "${IDEMGEN_TEST_REDIS_ADDR:-}" >"$out/benchserver.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  curl -s -o /dev/null "http://127.0.0.1:$port/_effects" && break
  sleep 0.1
done

# The HTTP load comes from wrk (Debian package wrk): it costs the shared cores a fifth of what
# the Go generator costs per request (bench/README.md). It is installed when missing and this
# runs as root; without it the short mode falls back to the Go generator and the full mode stops.
wrk=$(command -v wrk || true)
if [ -z "$wrk" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "bench: installing wrk (apt-get install wrk)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null 2>&1; } || true
  wrk=$(command -v wrk || true)
fi
drive=("$out/benchdrive" -url "http://127.0.0.1:$port" -pid "$server")
if [ -n "$wrk" ]; then
  drive+=(-wrk "$wrk")
elif [ -z "$short" ]; then
  echo "bench: wrk not found; install the Debian package wrk (apt-get install wrk)" >&2
  exit 1
else
  echo "bench: wrk not found; the short mode uses the Go load generator" >&2
fi

echo "== HTTP end to end" >&2
if [ -n "$short" ] && [ -n "$only" ]; then
  "${drive[@]}" -short -only "$only" | tee "$out/http.md"
elif [ -n "$short" ]; then
  "${drive[@]}" -short | tee "$out/http.md"
elif [ -n "$only" ]; then
  "${drive[@]}" -rounds 7 -duration 1s -concurrency 1,8,16,32 -storm 200 -only "$only" | tee "$out/http.md"
else
  "${drive[@]}" -rounds 7 -duration 1s -concurrency 1,8,16,32 -storm 200 | tee "$out/http.md"
fi
kill $server 2>/dev/null || true
wait $server 2>/dev/null || true
if [ -n "$only" ]; then
  echo "bench: done in $(( $(date +%s) - started ))s; $out/http.md (load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  exit 0
fi

echo "== canonical form and fingerprint" >&2
if [ -n "$short" ]; then
  go test -run '^$' -bench . -benchtime 20x ./bench/canonical/ ./golden/conformance/ >"$out/canonical.txt"
else
  go test -run '^$' -bench . -benchmem -benchtime 200ms -count 5 ./bench/canonical/ ./golden/conformance/ >"$out/canonical.txt"
fi
"$out/benchsum" <"$out/canonical.txt" | tee "$out/canonical.md"

if [ -z "$short" ]; then
  echo "== load and generate (Stripe, every POST marked)" >&2
  bench/load/run.sh 3 2>&1 | tee "$out/load.txt"
  bench/generate/run.sh 2>&1 | tee "$out/generate.txt"
fi

elapsed=$(( $(date +%s) - started ))
{
  echo "Machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), Linux $(uname -r); $(go version | cut -d' ' -f3); PostgreSQL $(psql "$DATABASE_URL" -Atc 'SHOW server_version' 2>/dev/null || echo '?') on loopback (synchronous_commit $(psql "$DATABASE_URL" -Atc 'SHOW synchronous_commit' 2>/dev/null || echo '?'), fsync $(psql "$DATABASE_URL" -Atc 'SHOW fsync' 2>/dev/null || echo '?')); Redis $(redis-server --version 2>/dev/null | awk '{print $3}' | cut -d= -f2) on loopback (${IDEMGEN_TEST_REDIS_ADDR:+appendonly yes, appendfsync everysec}$([ -n "${IDEMGEN_TEST_REDIS_ADDR:-}" ] || echo 'not started: no Redis variants')). Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg). Run: $(date -u +%Y-%m-%dT%H:%MZ), $elapsed s for the whole harness."
  echo
  cat "$out/http.md"
  echo
  echo "### Canonical form and fingerprint (golden/conformance, bench/canonical; medians of 5 runs)"
  echo
  cat "$out/canonical.md"
  if [ -z "$short" ]; then
    echo
    echo "### Loading Stripe's spec with every POST marked (bench/load/run.sh 3)"
    echo
    echo '```'
    grep -E '^Benchmark|^(bare|idemgen|cli list) ' "$out/load.txt" || true
    echo '```'
    echo
    echo "### Generating Go for it (bench/generate/run.sh)"
    echo
    echo '```'
    grep -E '^(marked|check|generate|output)' "$out/generate.txt" || true
    echo '```'
  fi
} >"$out/summary.md"

if [ -z "$short" ] && grep -q '<!-- results:start -->' bench/README.md 2>/dev/null; then
  python3 - "$out/summary.md" <<'EOF'
import sys
summary = open(sys.argv[1]).read()
readme = open("bench/README.md").read()
head, rest = readme.split("<!-- results:start -->", 1)
_, tail = rest.split("<!-- results:end -->", 1)
open("bench/README.md", "w").write(head + "<!-- results:start -->\n" + summary + "<!-- results:end -->" + tail)
EOF
  echo "rewrote the results section of bench/README.md" >&2
fi
echo "bench: done in ${elapsed}s; $out/summary.md" >&2
