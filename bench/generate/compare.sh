#!/bin/sh
# compare.sh BASE [RUNS]: generation time of idemgen at revision BASE against the working tree, in
# the same run, on the real specs of testdata/specs/vendor, then the build of the package each
# generates for Stripe's spec with every POST marked (222 operations). Each run alternates the two
# binaries (base first, then head), so a change of load hits both. Prints one line per
# measurement: revision, spec, wall seconds, user+sys CPU seconds, peak RSS (KB, GNU time's %M);
# then the medians and the head/base ratio of each. A ratio below 1 is head faster.
set -eu
base=${1:?usage: compare.sh BASE [RUNS]}
runs=${2:-5}
cd "$(dirname "$0")/../.."
root=$(pwd)
tmp=$(mktemp -d)
cleanup() {
  git worktree remove --force "$tmp/base" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
git worktree add --quiet --detach "$tmp/base" "$base"
(cd "$tmp/base" && go build -o "$tmp/idemgen-base" ./cmd/idemgen)
go build -o "$tmp/idemgen-head" ./cmd/idemgen
vendor=testdata/specs/vendor
bench/generate/mark-all-posts.sh "$vendor/stripe-spec3.yaml" > "$tmp/stripe-all.yaml"
bench/generate/mark-all-posts.sh "$vendor/twilio-api-v2010.yaml" > "$tmp/twilio-all.yaml"
# name, spec, generate's flags after --out
set -- \
  "stripe-all|$vendor/stripe-spec3.yaml|--config $tmp/stripe-all.yaml" \
  "twilio-all|$vendor/twilio-api-v2010.yaml|--config $tmp/twilio-all.yaml" \
  "coinbase|$vendor/coinbase-cdp.yaml|--infer" \
  "adyen|$vendor/adyen-checkout-v71.json|--infer" \
  "mollie|$vendor/mollie-api.yaml|--infer" \
  "svix|$vendor/svix-server-openapi.json|--infer"
for i in $(seq "$runs"); do
  for s in "$@"; do
    name=${s%%|*}; rest=${s#*|}; spec=${rest%%|*}; flags=${rest#*|}
    for rev in base head; do
      rm -rf "$tmp/out"
      # shellcheck disable=SC2086 # flags are words
      /usr/bin/time -f "$rev $name %e %U %S %M" -o "$tmp/time" "$tmp/idemgen-$rev" generate "$root/$spec" $flags --out "$tmp/out" --package p >/dev/null 2>&1 ||
        { echo "$rev $name: generate failed" >&2; exit 1; }
      awk '{ printf "%s %s %s s wall %.2f s cpu %s KB\n", $1, $2, $3, $4 + $5, $6 }' "$tmp/time" | tee -a "$tmp/all"
    done
  done
done
# The Stripe package of each revision, built in that revision's tree against its own runtime.
for rev in base head; do
  dir=$root; [ "$rev" = base ] && dir=$tmp/base
  rm -rf "$dir/bench/out/_stripe"
  "$tmp/idemgen-$rev" generate "$root/$vendor/stripe-spec3.yaml" --config "$tmp/stripe-all.yaml" --out "$dir/bench/out/_stripe" --package stripe >/dev/null 2>&1
  echo "$rev stripe-all package: $(cat "$dir"/bench/out/_stripe/*.go | wc -l) lines of Go"
  (cd "$dir" && go build ./runtime/...)
done
for i in $(seq "$runs"); do
  for rev in base head; do
    dir=$root; [ "$rev" = base ] && dir=$tmp/base
    printf 'package stripe\n\nconst buildBust = "%s"\n' "$(date +%s%N)" > "$dir/bench/out/_stripe/zz_bust.go"
    (cd "$dir" && /usr/bin/time -f "$rev build-stripe-all %e %U %S %M" -o "$tmp/time" go build -o /dev/null ./bench/out/_stripe)
    awk '{ printf "%s %s %s s wall %.2f s cpu %s KB\n", $1, $2, $3, $4 + $5, $6 }' "$tmp/time" | tee -a "$tmp/all"
  done
done
rm -rf "$root/bench/out/_stripe"
echo
echo "medians (wall s, cpu s, peak KB) and head/base ratios:"
awk '
  { key = $2; w[$1, key, ++n[$1, key]] = $3; c[$1, key, n[$1, key]] = $6; m[$1, key, n[$1, key]] = $9; keys[key] = 1 }
  function median(a, rev, key, k,   i, j, t, v) {
    for (i = 1; i <= k; i++) v[i] = a[rev, key, i]
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
  }
  END {
    for (key in keys) {
      k = n["base", key]
      bw = median(w, "base", key, k); hw = median(w, "head", key, k)
      bc = median(c, "base", key, k); hc = median(c, "head", key, k)
      bm = median(m, "base", key, k); hm = median(m, "head", key, k)
      printf "%-18s wall %6.2f -> %6.2f (%.2f)  cpu %6.2f -> %6.2f (%.2f)  peak %7d -> %7d KB (%.2f)\n", key, bw, hw, hw / bw, bc, hc, hc / bc, bm, hm, hm / bm
    }
  }' "$tmp/all" | sort
