#!/usr/bin/env bash
# with-citus.sh CMD [ARGS...]
# with-citus.sh --serve
#
# Starts a throwaway Citus cluster on loopback — a coordinator and two workers, each a
# PostgreSQL server of its own in a temporary folder, on free ports — registers the workers with
# the coordinator, runs CMD with CITUS_URL (the coordinator's database `postgres`, where the
# citus extension is created) and CITUS_WORKERS (the workers' URLs, comma-separated) in the
# environment, then stops the three servers and deletes the folder, whatever CMD's outcome.
# CMD's exit status is this script's. With --serve it runs no command: it prints the URLs and
# keeps the cluster up until it is interrupted (Ctrl-C) or sent SIGTERM.
#
# Citus is not a Debian package: it must be built and installed into the PostgreSQL server's
# directories first (docs/distributed.md, "A local Citus cluster", has the steps from Citus's
# public release). This script only checks that it is there (citus.so in pg_config's pkglibdir
# or beside the newest server's binaries) and says how to get it when it is not.
#
# initdb refuses to run as root, so as root the clusters belong to the `postgres` user.
# IDEMGEN_CITUS_WORKERS sets the number of workers (default 2), IDEMGEN_CITUS_SHARDS the shards of a
# distributed table (citus.shard_count, default 8: a table is distributed faster than with 32). Set IDEMGEN_CITUS_KEEP=1 to
# keep the folder (and the servers' logs) for a post-mortem.
set -euo pipefail

serve=
if [ "${1:-}" = --serve ]; then
  serve=1; shift
  [ $# = 0 ] || { echo "with-citus: --serve takes no command" >&2; exit 2; }
elif [ $# = 0 ]; then
  echo "usage: with-citus.sh CMD [ARGS...]  or  with-citus.sh --serve" >&2; exit 2
fi

workers=${IDEMGEN_CITUS_WORKERS:-2}

# The newest PostgreSQL server whose library folder holds citus.so.
bindir=
for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
  if [ -x "$d/initdb" ] && [ -f "$d/../lib/citus.so" ]; then bindir=$d; break; fi
done
if [ -z "$bindir" ] && command -v pg_config >/dev/null 2>&1 && [ -f "$(pg_config --pkglibdir)/citus.so" ]; then
  bindir=$(pg_config --bindir)
fi
if [ -z "$bindir" ]; then
  cat >&2 <<'MSG'
with-citus: Citus is not installed (no citus.so beside a PostgreSQL server). Citus is not a Debian
package; build it from its public release into the server's directories, as docs/distributed.md
("A local Citus cluster") shows, e.g. for PostgreSQL 15 and Citus 13.2.2:

  apt-get install postgresql-15 postgresql-server-dev-15 libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev
  curl -L https://github.com/citusdata/citus/archive/refs/tags/v13.2.2.tar.gz | tar xz
  cd citus-13.2.2 && ./configure && make -j"$(nproc)" && make install
MSG
  exit 1
fi

as_owner=()
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
  as_owner=(runuser -u postgres --)
fi

dir=$(mktemp -d /tmp/idemgen-citus.XXXXXX)
chmod 755 "$dir"
[ "$(id -u)" = 0 ] && chown postgres "$dir"

free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
  else
    echo $(( 20000 + RANDOM % 40000 ))
  fi
}

nodes=() # node names, coordinator first
stop() {
  local rc=$?
  if [ -n "$serve" ]; then
    rc=0
    [ -z "${sleeper:-}" ] || kill "$sleeper" 2>/dev/null || true
  fi
  local n
  for n in "${nodes[@]}"; do
    "${as_owner[@]}" "$bindir/pg_ctl" -D "$dir/$n" -m immediate -w stop >/dev/null 2>&1 || true
  done
  if [ "${IDEMGEN_CITUS_KEEP:-}" = 1 ]; then
    echo "with-citus: kept $dir" >&2
  else
    rm -rf "$dir"
  fi
  exit "$rc"
}
trap stop EXIT INT TERM

# start_node NAME: initdb and start a server with Citus preloaded; sets port.
start_node() {
  local name=$1 attempt
  "${as_owner[@]}" "$bindir/initdb" -D "$dir/$name" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/$name.initdb.log" 2>&1 ||
    { cat "$dir/$name.initdb.log" >&2; exit 1; }
  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    # max_connections: the coordinator opens connections to the workers for its own sessions'
    # statements, so the workers need as many as the coordinator's clients.
    if "${as_owner[@]}" "$bindir/pg_ctl" -D "$dir/$name" -l "$dir/$name.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=300 -c shared_buffers=128MB -c shared_preload_libraries=citus -c citus.enable_statistics_collection=off -c citus.shard_count=${IDEMGEN_CITUS_SHARDS:-8}" \
        start >/dev/null 2>&1; then
      nodes+=("$name")
      "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d postgres \
        -c "CREATE EXTENSION citus" >/dev/null
      return 0
    fi
  done
  echo "with-citus: $name did not start; its log:" >&2
  cat "$dir/$name.log" >&2 || true
  exit 1
}

start_node coordinator
coord_port=$port
worker_urls=()
for i in $(seq 1 "$workers"); do
  start_node "worker$i"
  worker_urls+=("postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable")
  "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$coord_port" -U postgres -d postgres \
    -c "SELECT citus_add_node('127.0.0.1', $port)" >/dev/null
done
"$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$coord_port" -U postgres -d postgres \
  -c "SELECT citus_set_coordinator_host('127.0.0.1', $coord_port)" >/dev/null

export CITUS_URL="postgres://postgres@127.0.0.1:$coord_port/postgres?sslmode=disable"
CITUS_WORKERS=$(IFS=,; echo "${worker_urls[*]}")
export CITUS_WORKERS
export IDEMGEN_PG_BINDIR="$bindir"
version=$("$bindir/psql" -X -At -h 127.0.0.1 -p "$coord_port" -U postgres -d postgres \
  -c "SELECT extversion FROM pg_extension WHERE extname = 'citus'")
echo "with-citus: Citus $version on PostgreSQL $("$bindir/postgres" --version | awk '{print $3}'): coordinator 127.0.0.1:$coord_port, $workers workers" >&2
if [ -n "$serve" ]; then
  cat <<MSG
Citus is up: a coordinator on 127.0.0.1:$coord_port and $workers workers (user postgres, no
password, database postgres); the servers' logs are in $dir. Connect with:

  export CITUS_URL='$CITUS_URL'
  psql "\$CITUS_URL"

It stays up until you press Ctrl-C (or send SIGTERM to process $$); then it is stopped and its
folder deleted.
MSG
  while :; do
    sleep 3600 &
    sleeper=$!
    wait "$sleeper" || true
  done
fi
set +e
"$@"
