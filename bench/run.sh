#!/usr/bin/env bash
# bench/run.sh [-short]
#
# Runs the whole benchmark harness against the PostgreSQL in DATABASE_URL (make bench starts a
# throwaway one) and writes the results to bench/out/. Without -short it also rewrites the
# "Results" section of bench/README.md from them. -short is the smoke mode CI runs: every part
# runs briefly, so the harness cannot rot; its figures mean nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
short=
[ "${1:-}" = "-short" ] && short=1
: "${DATABASE_URL:?run under scripts/with-postgres.sh (make bench)}"
out=bench/out
mkdir -p "$out"
go build -o "$out/benchserver" ./bench/cmd/benchserver
go build -o "$out/benchdrive" ./bench/cmd/benchdrive

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
"$out/benchserver" -addr "127.0.0.1:$port" -conns 64 >"$out/benchserver.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  curl -s -o /dev/null "http://127.0.0.1:$port/_effects" && break
  sleep 0.1
done

echo "== HTTP end to end" >&2
if [ -n "$short" ]; then
  "$out/benchdrive" -url "http://127.0.0.1:$port" -pid "$server" -short | tee "$out/http.md"
else
  "$out/benchdrive" -url "http://127.0.0.1:$port" -pid "$server" -rounds 5 -duration 2s -concurrency 1,8,16,32 | tee "$out/http.md"
fi
kill $server 2>/dev/null || true

echo "== canonical form and fingerprint" >&2
if [ -n "$short" ]; then
  go test -run '^$' -bench . -benchtime 20x ./bench/canonical/ | tee "$out/canonical.txt"
else
  go test -run '^$' -bench . -benchmem -count 10 ./bench/canonical/ | tee "$out/canonical.txt"
fi

echo "== load and generate (Stripe, every POST marked)" >&2
if [ -z "$short" ]; then
  for d in bench/load bench/generate; do
    [ -d "$d" ] && go test -run '^$' -bench . -benchmem -count 3 "./$d/" | tee "$out/$(basename $d).txt"
  done
fi

if [ -z "$short" ]; then
  {
    echo "Machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(go version | cut -d' ' -f3); PostgreSQL $(psql --version | awk '{print $3}') on loopback, synchronous_commit on. Run: $(date -u +%Y-%m-%dT%H:%MZ)."
    echo
    cat "$out/http.md"
  } >"$out/summary.md"
  echo "wrote $out/summary.md (paste into bench/README.md after review)" >&2
fi
