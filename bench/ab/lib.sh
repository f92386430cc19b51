# bench/ab/lib.sh: what bench/ab/run.sh and bench/ab/profile.sh share (sourced, not run). The
# caller sets repo (the repository's root, the current directory) and out (bench/out), and runs
# under scripts/with-postgres.sh (DATABASE_URL).

tmp=$(mktemp -d /tmp/idemgen-ab.XXXXXX)
pids=()
worktrees=()
ab_cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for w in "${worktrees[@]}"; do git -C "$repo" worktree remove --force "$w" >/dev/null 2>&1 || true; done
  git -C "$repo" worktree prune >/dev/null 2>&1 || true
  rm -rf "$tmp"
  exit "$rc"
}
trap ab_cleanup EXIT INT TERM

# build_rev REV DEST: DEST is REV's benchserver, built in a detached worktree of REV under $tmp
# (removed on exit; nothing of it is committed).
build_rev() {
  local rev=$1 dest=$2 src
  src="$tmp/src-$(git -C "$repo" rev-parse --short "$rev^{commit}")-$RANDOM"
  git -C "$repo" worktree add --detach -q "$src" "$rev"
  worktrees+=("$src")
  (cd "$src" && go build -o "$dest" ./bench/cmd/benchserver)
}

# build_sides OLD-REV [NEW-REV]: $tmp/benchserver-old and -new, and their names in oldname and
# newname; without NEW-REV the new side is the working tree.
build_sides() {
  local oldrev=$1 newrev=${2:-}
  oldname=$(git rev-parse --short "$oldrev^{commit}")
  echo "bench/ab: building $oldname's benchserver in a temporary worktree" >&2
  build_rev "$oldrev" "$tmp/benchserver-old"
  if [ -n "$newrev" ]; then
    newname=$(git rev-parse --short "$newrev^{commit}")
    echo "bench/ab: building $newname's benchserver in a temporary worktree" >&2
    build_rev "$newrev" "$tmp/benchserver-new"
  else
    newname="$(git rev-parse --short HEAD)"
    # changes outside the harness (bench/ab, benchdrive, docs) change what is measured
    [ -z "$(git status --porcelain -- . ':!bench/ab' ':!bench/cmd/benchdrive' ':!*.md')" ] || newname="$newname+changes"
    go build -o "$tmp/benchserver-new" ./bench/cmd/benchserver
  fi
  [ "$newname" != "$oldname" ] || newname="$newname'"
  go build -o "$out/benchdrive" ./bench/cmd/benchdrive
}

# dburl NAME: DATABASE_URL with database NAME.
dburl() { python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$DATABASE_URL" "$1"; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# start_side SIDE: creates database idemgen_ab_SIDE afresh and starts $tmp/benchserver-SIDE on
# it; sets SIDEport and SIDEpid (oldport, oldpid, newport, newpid).
start_side() {
  local side=$1 port pid
  psql "$DATABASE_URL" -qAt -c "DROP DATABASE IF EXISTS idemgen_ab_$side" -c "CREATE DATABASE idemgen_ab_$side" >/dev/null 2>&1
  port=$(free_port)
  DATABASE_URL=$(dburl "idemgen_ab_$side") "$tmp/benchserver-$side" -addr "127.0.0.1:$port" -conns 64 >"$out/ab-benchserver-$side.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 1 150); do
    if curl -s -o /dev/null "http://127.0.0.1:$port/_bench/postmaster"; then
      printf -v "${side}port" %s "$port"
      printf -v "${side}pid" %s "$pid"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "bench/ab: the $side benchserver did not start; its log:" >&2
  cat "$out/ab-benchserver-$side.log" >&2
  exit 1
}

# find_wrk: wrk's path in wrk (empty when missing), installed from Debian's package when root.
find_wrk() {
  wrk=$(command -v wrk || true)
  if [ -z "$wrk" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bench/ab: installing wrk (apt-get install wrk)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null 2>&1; } || true
    wrk=$(command -v wrk || true)
  fi
}
