#!/usr/bin/env bash
# demo.sh — what `make demo` runs (under scripts/with-postgres.sh, which provides DATABASE_URL).
#
# Builds idemgen, lists the petstore's idempotent operations, regenerates its code, starts the
# example against the throwaway PostgreSQL and sends real requests with curl to show the four
# answers of an idempotent operation: New (201), Replay (Idempotent-Replayed: true), In-flight
# (409) and Mismatch (422). It fails if any answer is not the expected one, and always stops the
# server it started.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
if [ -z "${DATABASE_URL:-}" ]; then
  echo "demo: DATABASE_URL is not set; run it as \`make demo\` (which starts a throwaway PostgreSQL)" >&2
  exit 1
fi
if ! command -v curl >/dev/null 2>&1; then
  echo "demo: curl is needed (Debian: apt-get install curl)" >&2
  exit 1
fi

tmp=$(mktemp -d /tmp/idemgen-demo.XXXXXX)
server_pid=
cleanup() {
  local rc=$?
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT INT TERM

if [ -t 1 ]; then
  say() { printf '\n\033[1m%s\033[0m\n' "$*"; }
else
  say() { printf '\n== %s\n' "$*"; }
fi

say "1. Build idemgen"
echo "\$ go build -o bin/idemgen ./cmd/idemgen"
"$GO" build -o bin/idemgen ./cmd/idemgen

say "2. The operations examples/petstore/petstore.yaml marks with x-idempotent"
echo "\$ bin/idemgen list examples/petstore/petstore.yaml"
bin/idemgen list examples/petstore/petstore.yaml

say "3. Generate the Go code (the example's go:generate line runs the same command)"
echo "\$ bin/idemgen generate examples/petstore/petstore.yaml --out examples/petstore/api --package api --docs"
bin/idemgen generate examples/petstore/petstore.yaml --out examples/petstore/api --package api --docs
ls examples/petstore/api

say "4. Build the example and start it on the throwaway PostgreSQL"
"$GO" build -o bin/petstore ./examples/petstore
# placeOrder is made slow (2s) so that a concurrent retry can be caught in flight.
bin/petstore -addr 127.0.0.1:0 -order-delay 2s >"$tmp/server.log" 2>&1 &
server_pid=$!
base=
for _ in $(seq 1 100); do
  base=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$tmp/server.log" | head -1 || true)
  [ -n "$base" ] && break
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "demo: the petstore exited:" >&2; cat "$tmp/server.log" >&2; exit 1
  fi
  sleep 0.1
done
if [ -z "$base" ]; then
  echo "demo: the petstore did not start listening:" >&2; cat "$tmp/server.log" >&2; exit 1
fi
echo "petstore listening on $base"

run=$(date +%s)
pet_key="demo-pet-$run-0000000001"
order_key="demo-order-$run-000000002"
pet='{"name": "doggie", "photoUrls": ["https://example.com/doggie.jpg"], "status": "available"}'

# send LABEL WANT_STATUS METHOD PATH KEY BODY: sends one request, prints the answer's status,
# its idempotency headers and body, and fails unless the status is WANT_STATUS.
send() {
  local label=$1 want=$2 method=$3 path=$4 key=$5 body=$6 out=$tmp/$RANDOM
  curl -sS -o "$out.body" -D "$out.head" -X "$method" "$base$path" \
    -H 'api_key: demo-client' -H "Idempotency-Key: $key" -H 'Content-Type: application/json' \
    --data-binary "$body"
  local status
  status=$(head -1 "$out.head" | awk '{print $2}')
  printf '%-10s %s %s  Idempotency-Key: %s\n           %s\n' "$label" "$method" "$path" "$key" "$body"
  printf '  -> %s\n' "$(head -1 "$out.head" | tr -d '\r')"
  grep -i -E '^(Idempotent-Replayed|Retry-After|Location|Content-Type):' "$out.head" | tr -d '\r' | sed 's/^/     /' || true
  printf '     %s\n' "$(cat "$out.body")"
  cp "$out.body" "$tmp/last.body"
  if [ "$status" != "$want" ]; then
    echo "demo: $label answered $status, expected $want" >&2
    exit 1
  fi
  if [ "$label" = Replay ] && ! grep -qi '^Idempotent-Replayed: true' "$out.head"; then
    echo "demo: the replay carries no Idempotent-Replayed: true" >&2
    exit 1
  fi
}

say "5. New: the first request with a key runs the handler (one pet added)"
send New 201 POST /pet "$pet_key" "$pet"
pet_id=$(grep -o '"id": *[0-9]*' "$tmp/last.body" | head -1 | grep -o '[0-9]*$')

say "6. Replay: the response was lost, the client retries with the same key and body"
send Replay 201 POST /pet "$pet_key" "$pet"

order="{\"petId\": $pet_id, \"quantity\": 1, \"status\": \"placed\"}"
say "7. In-flight: an order takes 2s; its retry arrives while it still runs"
send First 201 POST /store/order "$order_key" "$order" >"$tmp/first.out" &
first=$!
sleep 0.5
send In-flight 409 POST /store/order "$order_key" "$order"
wait "$first"
cat "$tmp/first.out"

say "8. Mismatch: the same key with a changed quantity is a client bug, refused"
send Mismatch 422 POST /store/order "$order_key" "{\"petId\": $pet_id, \"quantity\": 5, \"status\": \"placed\"}"

say "9. What the database holds: each operation ran once, whatever the retries"
psql=${IDEMGEN_PG_BINDIR:-}/psql
command -v "$psql" >/dev/null 2>&1 || psql=$(command -v psql || true)
if [ -n "$psql" ]; then
  pets=$("$psql" "$DATABASE_URL" -Atc 'SELECT count(*) FROM pets')
  orders=$("$psql" "$DATABASE_URL" -Atc 'SELECT count(*) FROM orders')
  records=$("$psql" "$DATABASE_URL" -Atc 'SELECT count(*) FROM idempotency_records')
  echo "pets: $pets, orders: $orders, idempotency records: $records"
  if [ "$pets" != 1 ] || [ "$orders" != 1 ]; then
    echo "demo: expected one pet and one order" >&2
    exit 1
  fi
else
  echo "(psql not found: skipped counting rows)"
fi

say "Done. Stopping the petstore."
