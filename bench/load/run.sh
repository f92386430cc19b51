#!/usr/bin/env bash
# bench/load/run.sh [ROUNDS]: the loader benchmark of bench/load/RESULTS.md.
# 1. go test -bench: bare kin-openapi load vs idemgen load+list of stripe-spec3.yaml with every
#    POST marked by a config file, alternating in one process (wall and CPU time, ratios).
# 2. Peak resident memory of each, one process per load, ROUNDS times alternating (GNU time).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-5}
spec=testdata/specs/vendor/stripe-spec3.yaml
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

go test -run '^$' -bench Stripe -benchtime 8x -count 3 ./bench/load/

go build -o "$out/peakmem" ./bench/load/peakmem
go build -o "$out/idemgen" ./cmd/idemgen
"$out/peakmem" -mode posts-config "$spec" >"$out/posts.yaml"
t() { /usr/bin/time -a -o "$out/time.txt" -f "$1 %e s wall  %U+%S s cpu  %M KB max RSS" "${@:2}" >/dev/null 2>&1; }
for i in $(seq 1 "$rounds"); do
  t "bare    " "$out/peakmem" -mode bare "$spec"
  t "idemgen " "$out/peakmem" -mode idemgen -config "$out/posts.yaml" "$spec"
  t "cli list" "$out/idemgen" list --config "$out/posts.yaml" --format json "$spec"
done
sort -s -k1,1 "$out/time.txt"
