#!/usr/bin/env bash
# bench/stages.sh [-n N] [SCENARIO ...]
#
# Where a request's cost goes, stage by stage (admit, decode, fingerprint, key, lookup, decide,
# answer, log, trace, metrics, slots, write; bench/cmd/benchcount's list), for each scenario
# (default: a replay and a mismatch through the generated handler and through the middleware),
# measured on bench/internal/reqcost's loop (one process, net/http on loopback, GOMAXPROCS 1):
#
#   instructions/request  valgrind's callgrind on N requests between two marks (default 300),
#                         exact and repeatable: the own instructions of each stage's functions
#                         and of the library calls only it makes (benchcount's report.go says
#                         why not everything under them); then the whole request by component
#   allocations/request   an allocation profile recording every allocation, the objects
#                         allocated under each stage's functions over 3,000 requests
#   share of server CPU   a CPU profile of 30,000 requests, the samples under each stage's
#                         functions over the samples outside the loop's client; with the
#                         server CPU per request that bench/run.sh measures on a quiet machine,
#                         share × server CPU is the stage's µs (noisy under load: the shares
#                         move a little, the instructions and allocations not at all)
#
# Writes bench/out/stages.md and the profiles bench/out/stages-*.{pprof,callgrind}. Needs
# DATABASE_URL (scripts/with-postgres.sh) and valgrind (the instruction column is left out
# without it). About 2 minutes a scenario.
#
#   scripts/with-postgres.sh bench/stages.sh 'generated handler, replay'
set -euo pipefail
cd "$(dirname "$0")/.."
n=300
if [ "${1:-}" = -n ]; then n="${2:?}"; shift 2; fi
: "${DATABASE_URL:?run under scripts/with-postgres.sh}"
out=bench/out
mkdir -p "$out"
go build -o "$out/benchcount" ./bench/cmd/benchcount
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=("generated handler, replay" "generated handler, mismatch" "middleware, replay" "middleware, mismatch")

# focus_total PROFILE SAMPLE_INDEX FOCUS IGNORE: the profile's total under FOCUS less IGNORE (in
# the profile's unit: objects, or seconds of CPU).
focus_total() {
  local args=(-sample_index="$2" -top -nodecount=1000000 -nodefraction=0 -edgefraction=0)
  [ -z "$3" ] || args+=(-focus="$3")
  [ -z "$4" ] || args+=(-ignore="$4")
  go tool pprof "${args[@]}" "$out/benchcount" "$1" 2>/dev/null |
    awk '/^Showing nodes accounting for/ { v = $5; sub(",$", "", v); if (v ~ /ms$/) { sub("ms$", "", v); v /= 1000 } else if (v ~ /s$/) sub("s$", "", v); print v + 0; found = 1 } END { if (!found) print 0 }'
}

{
for s in "${scenarios[@]}"; do
  slug=$(echo "$s" | tr -c 'a-z0-9\n' '-')
  echo "### $s"
  echo
  instr=()
  if command -v valgrind >/dev/null; then
    dir=$(mktemp -d)
    GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --dump-before='*reqcost.Mark' --callgrind-out-file="$dir/cg.out" \
      "$out/benchcount" -loop "$s" -warm 50 -n "$n" >/dev/null 2>"$dir/log" || { cat "$dir/log" >&2; exit 1; }
    cp "$dir/cg.out.2" "$out/stages-$slug.callgrind"
    rm -rf "$dir"
    "$out/benchcount" -callgrind "$out/stages-$slug.callgrind" -n "$n" >"$out/stages-$slug-instructions.md"
    mapfile -t instr < <(awk -F'|' 'NR > 2 && NF == 5 { gsub(/[ *]/, "", $4); print $2 "|" $4 }' "$out/stages-$slug-instructions.md")
  fi
  "$out/benchcount" -loop "$s" -warm 0 -n 3000 -memprofile "$out/stages-$slug-allocs.pprof" 2>/dev/null
  "$out/benchcount" -loop "$s" -warm 100 -n 30000 -cpuprofile "$out/stages-$slug-cpu.pprof" 2>/dev/null
  cpu_all=$(focus_total "$out/stages-$slug-cpu.pprof" cpu "" "")
  cpu_client=$(focus_total "$out/stages-$slug-cpu.pprof" cpu 'reqcost\.\(\*Requests\)\.' "")
  echo "| stage | instructions/request | allocations/request | share of server CPU |"
  echo "|---|---:|---:|---:|"
  while IFS=$'\t' read -r name focus ignore; do
    ins="—"
    for row in "${instr[@]}"; do
      [ "$(echo "${row%%|*}" | xargs)" != "$name" ] || ins=${row#*|}
    done
    allocs=$(focus_total "$out/stages-$slug-allocs.pprof" alloc_objects "$focus" "$ignore")
    cpu=$(focus_total "$out/stages-$slug-cpu.pprof" cpu "$focus" "$ignore")
    awk -v name="$name" -v ins="$ins" -v a="$allocs" -v c="$cpu" -v all="$cpu_all" -v client="$cpu_client" -v n=3000 \
      'BEGIN { printf "| %s | %s | %.1f | %.1f%% |\n", name, ins, a / n, 100 * c / (all - client) }'
  done < <("$out/benchcount" -stages)
  for row in "${instr[@]}"; do
    case "${row%%|*}" in
      *glue*|*"the rest"*|*total*) echo "| ${row%%|*} | ${row#*|} | | |" ;;
    esac
  done
  echo
  [ ! -f "$out/stages-$slug-instructions.md" ] || sed -n '/^| component/,$p' "$out/stages-$slug-instructions.md"
  echo
done
echo "Run: $(date -u +%Y-%m-%dT%H:%MZ); load average $(cut -d' ' -f1-3 /proc/loadavg) (the CPU shares move with it, the counts do not); $(go version | cut -d' ' -f3)."
} | tee "$out/stages.md"
