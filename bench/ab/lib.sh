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

# build_peer: $tmp/benchserver-old is the peer's server (bench/peer: idemlease v1.1.0's httpidem
# on its pgstore), built from a copy of bench/peer under $tmp, and its name is in oldname; the new
# side is the working tree's benchserver (newname). The peer's module comes from the Go module
# proxy, or, when PEER_DIR names an extracted tree of its public source (its root, with
# pgstore/ inside; bench/README.md, "The peer"), from there: the copy's go.mod gets a replace of
# both modules to it. Nothing of either is committed.
build_peer() {
  local src="$tmp/peer"
  mkdir -p "$src"
  cp bench/peer/go.mod bench/peer/go.sum bench/peer/*.go "$src/"
  oldname="idemlease v1.1.0"
  if [ -n "${PEER_DIR:-}" ]; then
    local dir
    dir=$(cd "$PEER_DIR" && pwd) || { echo "bench/ab: PEER_DIR=$PEER_DIR is not a directory" >&2; exit 1; }
    if ! grep -qx 'module github.com/repenguin22/idemlease' "$dir/go.mod" 2>/dev/null ||
       ! grep -qx 'module github.com/repenguin22/idemlease/pgstore' "$dir/pgstore/go.mod" 2>/dev/null; then
      echo "bench/ab: PEER_DIR=$PEER_DIR is not a tree of github.com/repenguin22/idemlease with its pgstore module (go.mod, pgstore/go.mod)" >&2
      exit 1
    fi
    (cd "$src" && go mod edit -replace "github.com/repenguin22/idemlease=$dir" -replace "github.com/repenguin22/idemlease/pgstore=$dir/pgstore")
    oldname="idemlease v1.1.0 (PEER_DIR)"
  fi
  echo "bench/ab: building the peer's server (bench/peer, $oldname)" >&2
  # -mod=mod: the committed go.sum has no line of the peer's modules (the proxy this harness was
  # written on refused them, so none could be checked): the go command adds them, checked
  # against the checksum database, or needs none for a replaced module.
  if ! (cd "$src" && GOFLAGS=-mod=mod go build -o "$tmp/benchserver-old" .); then
    echo "bench/ab: the peer's server did not build; where the Go module proxy refuses github.com/repenguin22/idemlease, set PEER_DIR (bench/README.md, \"The peer\")" >&2
    exit 1
  fi
  newname="$(git rev-parse --short HEAD)"
  [ -z "$(git status --porcelain -- . ':!bench/ab' ':!bench/cmd/benchdrive' ':!bench/peer' ':!*.md')" ] || newname="$newname+changes"
  go build -o "$tmp/benchserver-new" ./bench/cmd/benchserver
  go build -o "$out/benchdrive" ./bench/cmd/benchdrive
}
