#!/bin/sh
# run.sh: generation time and peak memory of `idemgen generate` on Stripe's spec with every POST
# marked by a config file (issue 4 item 6; targets: under 3 s and 800 MB). Prints one line per
# run: wall seconds, peak resident set (KB, GNU time's %M), and the same for `idemgen check`
# (load and validate only) so the generator's own share is visible.
set -eu
cd "$(dirname "$0")/../.."
spec=testdata/specs/vendor/stripe-spec3.yaml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/idemgen" ./cmd/idemgen
bench/generate/mark-all-posts.sh "$spec" > "$tmp/stripe-config.yaml"
echo "marked: $(grep -c ': true' "$tmp/stripe-config.yaml") POST operations"
for i in 1 2 3 4 5; do
  /usr/bin/time -f "check    %e s wall  %U s user  %S s sys  %M KB" "$tmp/idemgen" check "$spec" --config "$tmp/stripe-config.yaml" >/dev/null 2>"$tmp/check.err" || true
  tail -1 "$tmp/check.err"
  rm -rf "$tmp/out"
  /usr/bin/time -f "generate %e s wall  %U s user  %S s sys  %M KB" "$tmp/idemgen" generate "$spec" --config "$tmp/stripe-config.yaml" --out "$tmp/out" --package stripe >/dev/null 2>"$tmp/gen.err"
  tail -1 "$tmp/gen.err"
done
echo "output: $(cat "$tmp"/out/*.go | wc -l) lines of Go in $(ls "$tmp"/out | wc -l) files"
