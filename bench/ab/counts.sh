#!/usr/bin/env bash
# bench/ab/counts.sh [-n N] [-only REGEXP] [-new REV] [OLD-REV]
#
# The request-cost counts of two revisions side by side, in one run (bench/internal/reqcost: the
# counts the machine's load cannot move): allocations, bytes, statements and round trips per
# request for every scenario (the least over 5 batches of N, default 200), and the instructions
# per request of each replay and mismatch scenario under valgrind's callgrind (N requests between
# two marks, the scheduler's instructions excluded as bench/guard does).
# OLD-REV (default: main) against the working tree, or against -new REV; each is built in a
# temporary git worktree. A revision older than the harness gets this tree's bench/cmd/benchcount,
# bench/internal/reqcost and bench/internal/callgrind copied in (they use the public API and
# bench/internal/baseline, which every revision since issue 5 has); if it does not build there,
# the script says so. Writes bench/out/ab-counts.md. Needs DATABASE_URL (scripts/with-postgres.sh)
# and valgrind (Debian package; the instruction columns are left out without it).
#
#   scripts/with-postgres.sh bench/ab/counts.sh c79593f            # the working tree against c79593f
#   scripts/with-postgres.sh bench/ab/counts.sh -new main c79593f  # main against c79593f
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
n=200 only= newrev= oldrev=main
while [ $# -gt 0 ]; do
  case "$1" in
    -n) n="${2:?}"; shift ;;
    -only) only="${2:?}"; shift ;;
    -new) newrev="${2:?}"; shift ;;
    -*) echo "usage: bench/ab/counts.sh [-n N] [-only REGEXP] [-new REV] [OLD-REV]" >&2; exit 2 ;;
    *) oldrev="$1" ;;
  esac
  shift
done
: "${DATABASE_URL:?run under scripts/with-postgres.sh}"
out=bench/out
mkdir -p "$out"
tmp=$(mktemp -d /tmp/idemgen-counts.XXXXXX)
worktrees=()
cleanup() {
  for w in "${worktrees[@]}"; do git -C "$repo" worktree remove --force "$w" >/dev/null 2>&1 || true; done
  git -C "$repo" worktree prune >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

harness=(bench/cmd/benchcount bench/internal/reqcost bench/internal/callgrind)

# build SIDE REV: $tmp/benchcount-SIDE from REV ("" : the working tree); sets SIDEname.
build() {
  local side=$1 rev=$2 src name
  if [ -z "$rev" ]; then
    name=$(git rev-parse --short HEAD)
    [ -z "$(git status --porcelain -- . ':!bench/ab' ':!*.md')" ] || name="$name+changes"
    go build -o "$tmp/benchcount-$side" ./bench/cmd/benchcount
  else
    name=$(git rev-parse --short "$rev^{commit}")
    src="$tmp/src-$side"
    git worktree add --detach -q "$src" "$rev"
    worktrees+=("$src")
    local copied=
    for d in "${harness[@]}"; do
      if [ ! -d "$src/$d" ]; then
        mkdir -p "$src/$d" && cp "$d"/*.go "$src/$d/"
        copied=1
      fi
    done
    [ -z "$copied" ] || name="$name (with this tree's request-cost harness)"
    # A revision without ClaimWithStatement.LockAtRead builds the harness without that path
    # (bench/internal/reqcost/lockatread_old.go).
    if ! (cd "$src" && { go build -o "$tmp/benchcount-$side" ./bench/cmd/benchcount ||
      { [ -n "$copied" ] && go build -tags reqcost_old -o "$tmp/benchcount-$side" ./bench/cmd/benchcount; }; }) 2>"$tmp/build-$side.log"; then
      echo "bench/ab/counts: $rev does not build this tree's request-cost harness:" >&2
      cat "$tmp/build-$side.log" >&2
      exit 1
    fi
  fi
  printf -v "${side}name" %s "$name"
}

echo "bench/ab/counts: building $oldrev and ${newrev:-the working tree}" >&2
build old "$oldrev"
build new "$newrev"
# this tree's benchcount reads every callgrind dump, whichever side made it
go build -o "$tmp/benchcount-this" ./bench/cmd/benchcount

# dburl NAME: DATABASE_URL with database NAME, created afresh.
dburl() {
  psql "$DATABASE_URL" -qAt -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" >/dev/null 2>&1
  python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$DATABASE_URL" "$1"
}

# counts SIDE: the counts table of SIDE's benchcount into $tmp/counts-SIDE.
for side in old new; do
  DATABASE_URL=$(dburl "idemgen_counts_$side") "$tmp/benchcount-$side" -n "$n" >"$tmp/counts-$side"
done

# instructions SIDE SCENARIO: instructions per request between the marks.
instructions() {
  local side=$1 scenario=$2 dir
  dir=$(mktemp -d "$tmp/cg.XXXXXX")
  GODEBUG=asyncpreemptoff=1 DATABASE_URL=$(dburl "idemgen_counts_$side") valgrind --tool=callgrind \
    --dump-before='*reqcost.Mark' --callgrind-out-file="$dir/callgrind.out" \
    "$tmp/benchcount-$side" -loop "$scenario" -warm 50 -n "$n" >/dev/null 2>"$dir/log" || { cat "$dir/log" >&2; return 1; }
  # parsed by this tree's benchcount whatever the side: the scheduler's instructions excluded
  "$tmp/benchcount-this" -work "$dir/callgrind.out.2" -n "$n"
}

{
  echo "## Request costs: $oldname (old) against $newname (new)"
  echo
  echo "Per request; allocations, bytes, statements and round trips the least over 5 batches of $n requests, instructions over $n requests under callgrind, the scheduler's excluded (bench/README.md, \"Request-cost guard\")."
  echo
  echo "| scenario | allocations old → new | bytes old → new | statements old → new | round trips old → new | instructions old → new |"
  echo "|---|---|---|---|---|---|"
  grep '^| [a-z]' "$tmp/counts-old" | grep -v '^| scenario' | while IFS='|' read -r _ scenario a b s r _; do
    scenario=$(echo "$scenario" | xargs)
    [ -z "$only" ] || echo "$scenario" | grep -Eq "$only" || continue
    row=$(grep -F "| $scenario |" "$tmp/counts-new" || true)
    IFS='|' read -r _ _ a2 b2 s2 r2 _ <<<"$row"
    first() { echo "$1" | awk '{print $1}'; }
    ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf " (×%.2f)", b / a }'; }
    ins="—"
    if command -v valgrind >/dev/null && [[ "$scenario" == *replay* || "$scenario" == *mismatch* ]]; then
      i1=$(instructions old "$scenario") i2=$(instructions new "$scenario")
      ins="$i1 → $i2$(ratio "$i1" "$i2")"
    fi
    printf '| %s | %s → %s%s | %s → %s%s | %s → %s | %s → %s | %s |\n' "$scenario" \
      "$(first "$a")" "$(first "$a2")" "$(ratio "$(first "$a")" "$(first "$a2")")" \
      "$(first "$b")" "$(first "$b2")" "$(ratio "$(first "$b")" "$(first "$b2")")" \
      "$(first "$s")" "$(first "$s2")" "$(first "$r")" "$(first "$r2")" "$ins"
  done
  echo
  echo "Run: $(date -u +%Y-%m-%dT%H:%MZ); load average $(cut -d' ' -f1-3 /proc/loadavg) (counts do not depend on it); $(go version | cut -d' ' -f3); valgrind $(valgrind --version 2>/dev/null || echo none)."
} | tee "$out/ab-counts.md"
