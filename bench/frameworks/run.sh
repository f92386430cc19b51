#!/usr/bin/env bash
# bench/frameworks/run.sh [-short]
#
# The framework adapters against the net/http middleware and the generated handler (bench/README.md,
# "The echo and gin adapters against the net/http middleware", "The fiber adapter"): builds this
# module's server, which serves benchserver's variants plus the same createPayment through
# adapters/echo, adapters/gin and adapters/huma on the same pool, runtime configuration and business code, and
# through adapters/fiber on fasthttp (a listener of its own, same process and pool), and drives
# the generated handler's, the middleware's and the adapters' variants with benchdrive,
# interleaved over 7 rounds of 1 s at c = 8 and 32 (wrk; about 3 minutes). Writes bench/out/frameworks.md. -short is the smoke mode CI runs: one round
# of 200 ms, checking that the server and the variants work, not how fast.
# Run it under scripts/with-postgres.sh (make bench-frameworks).
set -euo pipefail
cd "$(dirname "$0")/../.."
short=
case "${1:-}" in
  -short) short=1 ;;
  "") ;;
  *) echo "usage: bench/frameworks/run.sh [-short]" >&2; exit 2 ;;
esac
: "${DATABASE_URL:?run under scripts/with-postgres.sh (make bench-frameworks)}"
out=bench/out
mkdir -p "$out"
(cd bench/frameworks && go build -o ../out/benchframeworks .)
go build -o "$out/benchdrive" ./bench/cmd/benchdrive

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
fport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
"$out/benchframeworks" -addr "127.0.0.1:$port" -fiber-addr "127.0.0.1:$fport" -conns 64 >"$out/benchframeworks.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  curl -s -o /dev/null "http://127.0.0.1:$port/_bench/frameworks" && break
  sleep 0.1
done

wrk=$(command -v wrk || true)
if [ -z "$wrk" ] && [ -z "$short" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "bench: installing wrk (apt-get install wrk)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null 2>&1; } || true
  wrk=$(command -v wrk || true)
fi
drive=("$out/benchdrive" -url "http://127.0.0.1:$port" -fiber-url "http://127.0.0.1:$fport" -pid "$server" -only '^(middleware|echo adapter|gin adapter|fiber adapter|huma adapter) \(ClaimWithStatement\)|^A/B ClaimWithStatement, ')
if [ -n "$short" ]; then
  # The Go load generator: the smoke mode needs no wrk.
  "${drive[@]}" -rounds 1 -duration 200ms -concurrency 8 | tee "$out/frameworks.md"
elif [ -n "$wrk" ]; then
  "${drive[@]}" -wrk "$wrk" -rounds 7 -duration 1s -concurrency 8,32 | tee "$out/frameworks.md"
else
  echo "bench: wrk not found; install the Debian package wrk (apt-get install wrk)" >&2
  exit 1
fi
if ! grep -q 'echo adapter' "$out/frameworks.md" || ! grep -q 'gin adapter' "$out/frameworks.md" || ! grep -q 'fiber adapter' "$out/frameworks.md" || ! grep -q 'huma adapter' "$out/frameworks.md"; then
  echo "bench: the adapters' variants did not run (is the server bench/frameworks?)" >&2
  exit 1
fi
echo "bench: $out/frameworks.md (load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
