#!/usr/bin/env bash
# with-redis.sh CMD [ARGS...]
#
# Starts, on free loopback ports in a temporary folder, a standalone redis-server and a Redis
# Cluster of three masters (no replicas), runs CMD with their addresses in the environment, then
# stops every server it started and deletes the folder, whatever CMD's outcome. CMD's exit
# status is this script's. It composes with with-postgres.sh in either order:
#
#   scripts/with-postgres.sh scripts/with-redis.sh scripts/test.sh
#
# Exported:
#   IDEMGEN_TEST_REDIS_ADDR      host:port of the standalone server
#   IDEMGEN_TEST_REDIS_CLUSTER   host:port of the three cluster masters, comma-separated
#   IDEMGEN_REDIS_SERVER         the redis-server binary, for tests that start private servers
#                                (failure tests kill and restart those, never these)
#
# Every server runs with appendonly yes, appendfsync everysec and no RDB snapshots: the
# durability docs/redis.md recommends and the failure tests restart with. If redis-server is
# missing, Debian's package is installed. Set IDEMGEN_REDIS_KEEP=1 to keep the folder (and the
# servers' logs) for a post-mortem.
set -euo pipefail

server=$(command -v redis-server || true)
cli=$(command -v redis-cli || true)
if [ -z "$server" ] || [ -z "$cli" ]; then
  echo "with-redis: redis-server not found; installing the Debian package" >&2
  . "$(dirname "$0")/apt.sh"
  apt_install redis-server
  server=$(command -v redis-server)
  cli=$(command -v redis-cli)
fi

dir=$(mktemp -d /tmp/idemgen-redis.XXXXXX)
pids=()

stop() {
  local rc=$?
  local p
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
  done
  for p in "${pids[@]}"; do
    # redis-server exits within a second of SIGTERM; after five, it is killed.
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  if [ "${IDEMGEN_REDIS_KEEP:-}" = 1 ]; then
    echo "with-redis: kept $dir" >&2
  else
    rm -rf "$dir"
  fi
  exit "$rc"
}
trap stop EXIT INT TERM

# free_port prints a loopback port that is free, and whose cluster bus port (+10000) is free too.
free_port() {
  python3 - <<'EOF'
import socket
while True:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]
    if p + 10000 > 65535:
        s.close(); continue
    b = socket.socket()
    try:
        b.bind(("127.0.0.1", p + 10000))
    except OSError:
        s.close(); b.close(); continue
    b.close(); s.close(); print(p); break
EOF
}

# start NAME [EXTRA CONFIG LINES...]: starts one server in $dir/NAME on a free port and sets
# $port. (Not in a command substitution: the server must stay this shell's child, in pids.)
port=
start() {
  local name=$1; shift
  local d="$dir/$name" attempt
  mkdir -p "$d"
  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    {
      echo "bind 127.0.0.1"
      echo "port $port"
      echo "dir $d"
      echo "logfile $d/server.log"
      echo "save \"\""
      echo "appendonly yes"
      echo "appendfsync everysec"
      printf '%s\n' "$@"
    } >"$d/redis.conf"
    "$server" "$d/redis.conf" </dev/null >>"$d/stdout.log" 2>&1 &
    local pid=$!
    local up=
    for _ in $(seq 1 100); do
      if "$cli" -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then up=1; break; fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    if [ -n "$up" ]; then
      pids+=("$pid")
      return 0
    fi
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  echo "with-redis: $name did not start; its log:" >&2
  cat "$d/server.log" >&2 || true
  return 1
}

start standalone
standalone=$port
cluster=()
for i in 1 2 3; do
  start "cluster-$i" "cluster-enabled yes" "cluster-config-file nodes.conf" "cluster-node-timeout 5000"
  cluster+=("127.0.0.1:$port")
done
"$cli" --cluster create "${cluster[@]}" --cluster-replicas 0 --cluster-yes >"$dir/cluster-create.log" 2>&1 ||
  { cat "$dir/cluster-create.log" >&2; exit 1; }
# The cluster is usable once every master agrees that all slots are served.
for node in "${cluster[@]}"; do
  ok=
  for _ in $(seq 1 200); do
    if "$cli" -h "${node%:*}" -p "${node#*:}" cluster info 2>/dev/null | grep -q '^cluster_state:ok'; then ok=1; break; fi
    sleep 0.05
  done
  [ -n "$ok" ] || { echo "with-redis: cluster node $node never reached cluster_state:ok" >&2; exit 1; }
done

export IDEMGEN_TEST_REDIS_ADDR="127.0.0.1:$standalone"
export IDEMGEN_TEST_REDIS_CLUSTER
IDEMGEN_TEST_REDIS_CLUSTER=$(IFS=,; echo "${cluster[*]}")
export IDEMGEN_REDIS_SERVER="$server"
echo "with-redis: Redis $("$server" --version | awk '{print $3}' | cut -d= -f2) standalone on $IDEMGEN_TEST_REDIS_ADDR, cluster on $IDEMGEN_TEST_REDIS_CLUSTER" >&2
set +e
"$@"
