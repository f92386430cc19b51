#!/bin/sh
# build.sh [RUNS]: how long `go build` takes, and how much memory it peaks at, for the package
# idemgen generates from Stripe's spec with every POST marked (222 operations): the cost a user
# pays on every change of a large API. The package is written to bench/out/_stripe (ignored by
# git); each run adds a file with a fresh constant, so that only that package is recompiled and
# its dependencies come from the build cache. Prints GNU time's wall, user and peak RSS per run.
set -eu
cd "$(dirname "$0")/../.."
runs=${1:-3}
spec=testdata/specs/vendor/stripe-spec3.yaml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/idemgen" ./cmd/idemgen
bench/generate/mark-all-posts.sh "$spec" > "$tmp/stripe-config.yaml"
rm -rf bench/out/_stripe
"$tmp/idemgen" generate "$spec" --config "$tmp/stripe-config.yaml" --out bench/out/_stripe --package stripe >/dev/null 2>&1
echo "generated: $(cat bench/out/_stripe/*.go | wc -l) lines of Go"
go build ./runtime/... # warm the cache with the dependencies
for i in $(seq "$runs"); do
  printf 'package stripe\n\nconst buildBust = "%s"\n' "$(date +%s%N)" > bench/out/_stripe/zz_bust.go
  /usr/bin/time -f "build %e s wall  %U s user  %M KB peak RSS" go build -o /dev/null ./bench/out/_stripe 2>&1 | tail -1
done
