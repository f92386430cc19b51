#!/usr/bin/env bash
# bench/stripe/run.sh [RUNS [COLD_RUNS]]: Stripe's whole spec with every POST marked (issue 14
# item 5), the cost a user pays for serving all of it: how long `idemgen generate` takes and how
# much memory it peaks at, how many lines of Go it writes, and how long `go build` of the
# generated package takes and peaks at. `make bench-stripe` runs it. RUNS (default 3) runs of
# generate and of the package's own build, COLD_RUNS (default 1) of the two cold-cache builds,
# which compile the standard library and every dependency (minutes of CPU time).
#
# Three builds, each under `/usr/bin/time -v`, whose peak RSS is that of the build's largest
# single process (in a cold build that may be a dependency's compiler: compare with deps):
#   deps   a cold cache (GOCACHE=$(mktemp -d)) building only the packages the generated one
#          imports (runtime, canonical, pgx ...): the share that is not the generated code's
#   cold   a cold cache building the generated package, its dependencies included: what a
#          fresh checkout or CI pays
#   pkg    the usual (warm) cache, where only the generated package is recompiled (a file with
#          a fresh constant is added): what a user pays on every change of the spec
# The package is written to bench/out/_stripe-all (ignored by git, and by ./... for its "_")
# and type-checked by `go vet` once, so a run that prints figures is also a run where the code
# compiles.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-3}
cold_runs=${2:-1}
spec=testdata/specs/vendor/stripe-spec3.yaml
out=bench/out/_stripe-all # "_": not part of ./... (go test, go vet)
tmp=$(mktemp -d)
cache=
trap 'rm -rf "$tmp" $cache' EXIT

# measure LABEL CMD...: runs CMD under /usr/bin/time -v, prints LABEL, wall, user+sys and peak RSS.
measure() {
  local label=$1
  shift
  if ! /usr/bin/time -v -o "$tmp/time" "$@" >"$tmp/cmd.out" 2>&1; then
    cat "$tmp/cmd.out" >&2
    echo "$label failed" >&2
    exit 1
  fi
  awk -v label="$label" -F': ' '
    /Elapsed \(wall clock\)/ { n = split($2, t, ":"); wall = (n == 3) ? t[1]*3600 + t[2]*60 + t[3] : t[1]*60 + t[2] }
    /User time/ { user = $2 } /System time/ { sys = $2 }
    /Maximum resident set size/ { rss = $2 }
    END { printf "%-9s %7.2f s wall %7.2f s cpu %6.0f MB peak RSS\n", label, wall, user + sys, rss / 1024 }
  ' "$tmp/time"
}

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(go version | cut -d' ' -f3-), $(date -u +'%Y-%m-%d %H:%M UTC')"
go build -o "$tmp/idemgen" ./cmd/idemgen
bench/generate/mark-all-posts.sh "$spec" >"$tmp/config.yaml"
echo "marked: $(grep -c ': true' "$tmp/config.yaml") POST operations"

for i in $(seq "$runs"); do
  rm -rf "$out"
  measure generate "$tmp/idemgen" generate "$spec" --config "$tmp/config.yaml" --out "$out" --package stripe
done
echo "output: $(cat "$out"/*.go | wc -l) lines of Go in $(ls "$out"/*.go | wc -l) files ($(cat "$out"/*.go | wc -c) bytes)"
go vet "./$out"
echo "go vet: ok"

deps=$(go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "./$out" | grep -v '/bench/out/')
for i in $(seq "$cold_runs"); do
  cache=$(mktemp -d)
  # shellcheck disable=SC2086
  GOCACHE=$cache measure deps go build $deps
  rm -rf "$cache"
  cache=$(mktemp -d)
  GOCACHE=$cache measure cold go build "./$out"
  rm -rf "$cache"
done
# The package alone, in the usual cache (go vet above filled it with the dependencies).
for i in $(seq "$runs"); do
  printf 'package stripe\n\nconst buildBust = "%s"\n' "$(date +%s%N)" >"$out/zz_bust.go"
  measure pkg go build "./$out"
done
rm -f "$out/zz_bust.go"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
