#!/usr/bin/env bash
# with-pgbouncer.sh CMD [ARGS...]
#
# Starts a throwaway PgBouncer in transaction pooling mode (pool_mode=transaction, how most
# PostgreSQL fleets run it) in front of the PostgreSQL server in DATABASE_URL (run it inside
# scripts/with-postgres.sh), runs CMD with its address in the environment, then stops it and
# deletes its folder, whatever CMD's outcome. CMD's exit status is this script's.
#
#   scripts/with-postgres.sh scripts/with-pgbouncer.sh go test ./runtime/pgstore -run Pooler
#
# Every database of the server is reachable through it under the same name (a wildcard entry),
# so a test's own database (internal/testkit/pgtest) is too. Exported:
#   IDEMGEN_TEST_PGBOUNCER_URL  the URL of the server's `postgres` database through PgBouncer
#                               (sslmode=disable, default_query_exec_mode=exec: the statement
#                               mode pgstore asks for behind transaction pooling)
#   IDEMGEN_PGBOUNCER_LOG       PgBouncer's log
#
# Settings that matter to the tests: at most 20 server connections per database and user
# (default_pool_size; a test's pool of 100 clients shares them), server_lifetime 3600 s (PgBouncer's
# default: a server connection outlives many clients), server_reset_query none (transaction
# pooling resets nothing between clients). If pgbouncer is missing, Debian's package is
# installed. PgBouncer refuses to run as root, so as root it runs as the `postgres` user. Set
# IDEMGEN_PGBOUNCER_KEEP=1 to keep the folder (and its log) for a post-mortem.
set -euo pipefail

if [ $# = 0 ]; then
  echo "usage: with-pgbouncer.sh CMD [ARGS...]  (inside scripts/with-postgres.sh)" >&2; exit 2
fi
if [ -z "${DATABASE_URL:-}" ]; then
  echo "with-pgbouncer: DATABASE_URL is not set: run it inside scripts/with-postgres.sh" >&2; exit 2
fi

bin=$(command -v pgbouncer || true)
[ -n "$bin" ] || [ ! -x /usr/sbin/pgbouncer ] || bin=/usr/sbin/pgbouncer
if [ -z "$bin" ]; then
  echo "with-pgbouncer: pgbouncer not found; installing the Debian package" >&2
  . "$(dirname "$0")/apt.sh"
  apt_install pgbouncer
  bin=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
fi

# The server's host and port, from DATABASE_URL (postgres://user@host:port/db?...).
hostport=${DATABASE_URL#*://}
hostport=${hostport#*@}
hostport=${hostport%%/*}
pghost=${hostport%:*}
pgport=${hostport##*:}

as_owner=()
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
  as_owner=(runuser -u postgres --)
fi

dir=$(mktemp -d /tmp/idemgen-pgbouncer.XXXXXX)
chmod 755 "$dir"
[ "$(id -u)" = 0 ] && chown postgres "$dir"
pid=

stop() {
  local rc=$?
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  if [ "${IDEMGEN_PGBOUNCER_KEEP:-}" = 1 ]; then
    echo "with-pgbouncer: kept $dir" >&2
  else
    rm -rf "$dir"
  fi
  exit "$rc"
}
trap stop EXIT INT TERM

free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
  else
    echo $(( 20000 + RANDOM % 40000 ))
  fi
}

echo '"postgres" ""' >"$dir/userlist.txt"
started=
for attempt in 1 2 3 4 5; do
  port=$(free_port)
  cat >"$dir/pgbouncer.ini" <<INI
[databases]
* = host=$pghost port=$pgport

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
admin_users = postgres
pool_mode = transaction
default_pool_size = 20
max_client_conn = 2000
max_db_connections = 0
server_reset_query =
server_lifetime = 3600
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
  [ "$(id -u)" = 0 ] && chown postgres "$dir"/*
  "${as_owner[@]}" "$bin" "$dir/pgbouncer.ini" </dev/null >>"$dir/stdout.log" 2>&1 &
  pid=$!
  up=
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then up=1; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  if [ -n "$up" ]; then started=1; break; fi
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
done
if [ -z "$started" ]; then
  echo "with-pgbouncer: PgBouncer did not start; its log:" >&2
  cat "$dir/pgbouncer.log" "$dir/stdout.log" >&2 2>/dev/null || true
  exit 1
fi

export IDEMGEN_TEST_PGBOUNCER_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable&default_query_exec_mode=exec"
export IDEMGEN_PGBOUNCER_LOG="$dir/pgbouncer.log"
echo "with-pgbouncer: PgBouncer $("$bin" --version | awk 'NR==1{print $2}') (pool_mode=transaction) on 127.0.0.1:$port in front of $pghost:$pgport" >&2
set +e
"$@"
