#!/usr/bin/env bash
# bench/floor.sh [-short]
#
# The floor of a new key (make bench-floor): the plain transaction, the floor (the same
# transaction that also inserts a record of idemgen's size into floor_records, a copy of the
# store's table, on both layouts) and idemgen's new key on the same handler code, with its A/B
# variants without the stored-bytes cap and with generic plans, measured side by side in one run
# against the PostgreSQL in DATABASE_URL (bench/run.sh -only), then the bytes per record of both
# tables (bench/recordbytes.sql) in both layouts' databases. Writes bench/out/floor.md; read its
# section "The floor" (ratios with their spread over the rounds) and the record bytes below it.
# -short is the smoke mode: one brief round, figures that mean nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
short=()
case "${1:-}" in
  -short) short=(-short) ;;
  "") ;;
  *) echo "usage: bench/floor.sh [-short]" >&2; exit 2 ;;
esac
: "${DATABASE_URL:?run under scripts/with-postgres.sh (make bench-floor)}"
out=bench/out
bench/run.sh "${short[@]}" -only '^(plain transaction|floor|A/B ClaimWithStatement.*new key|A/B partitioned table, new key)'
db=$(psql "$DATABASE_URL" -Atc 'SELECT current_database()')
{
  cat "$out/http.md"
  echo
  echo "### Bytes per record: idemgen's table against the floor's (bench/recordbytes.sql)"
  echo
  echo "Plain layout:"
  echo
  echo '```'
  psql "$DATABASE_URL" -X -q -v ON_ERROR_STOP=1 -f bench/recordbytes.sql
  echo '```'
  echo
  echo "Partitioned layout (database ${db}_partitioned):"
  echo
  echo '```'
  psql "$DATABASE_URL" -X -q -v ON_ERROR_STOP=1 -c "\\connect ${db}_partitioned" -f bench/recordbytes.sql
  echo '```'
} >"$out/floor.md"
# Both layouts' floor ratios, and both tables' rows in the two queries of each layout's bytes,
# must be there, or the harness is broken.
check() {
  if [ "$(grep -c -- "$1" "$out/floor.md")" -lt "$2" ]; then
    echo "bench/floor.sh: $out/floor.md has fewer than $2 lines matching $1" >&2
    exit 1
  fi
}
check '^| floor / plain transaction |' 1
check '^| partitioned: idemgen new key / floor |' 1
check '^ floor_records  *| *[1-9]' 4
check '^ idempotency_records  *| *[1-9]' 4
sed -n '/^### The floor/,$p' "$out/floor.md"
echo "bench: $out/floor.md" >&2
