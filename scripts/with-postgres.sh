#!/usr/bin/env bash
# with-postgres.sh CMD [ARGS...]
# with-postgres.sh --serve
#
# Starts a throwaway PostgreSQL server (initdb in a temporary folder, a free loopback port),
# runs CMD with DATABASE_URL and IDEMGEN_TEST_DATABASE_URL pointing at it, then stops the server
# and deletes the folder, whatever CMD's outcome. CMD's exit status is this script's.
#
# With --serve it runs no command: it prints how to connect (the URL to export, a psql command)
# and keeps the server up until it is interrupted (Ctrl-C) or sent SIGTERM, then stops it and
# deletes the folder. For trying a service by hand: run the service with that DATABASE_URL in
# another terminal and curl it. IDEMGEN_PG_PORT picks the port (default: a free one).
#
# If the PostgreSQL server binaries are missing, they are installed from Debian's packages.
# initdb refuses to run as root, so as root the cluster belongs to the `postgres` user.
# Set IDEMGEN_PG_KEEP=1 to keep the folder (and its server log) for a post-mortem. The log's path
# is exported as IDEMGEN_PG_LOG.
set -euo pipefail

serve=
if [ "${1:-}" = --serve ]; then
  serve=1; shift
  [ $# = 0 ] || { echo "with-postgres: --serve takes no command" >&2; exit 2; }
elif [ $# = 0 ]; then
  echo "usage: with-postgres.sh CMD [ARGS...]  or  with-postgres.sh --serve" >&2; exit 2
fi

find_bindir() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return 0; fi
  done
  return 1
}

bindir=$(find_bindir || true)
if [ -z "$bindir" ]; then
  echo "with-postgres: PostgreSQL server binaries not found; installing the Debian package" >&2
  . "$(dirname "$0")/apt.sh"
  apt_install postgresql
  bindir=$(find_bindir)
fi

# As root, run the server as `postgres`; otherwise as ourselves.
as_owner=()
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
  as_owner=(runuser -u postgres --)
fi

dir=$(mktemp -d /tmp/idemgen-pg.XXXXXX)
chmod 755 "$dir"
[ "$(id -u)" = 0 ] && chown postgres "$dir"

free_port() {
  # Ask the kernel for a free loopback port; fall back to a random high port.
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
  else
    echo $(( 20000 + RANDOM % 40000 ))
  fi
}

stop() {
  local rc=$?
  if [ -n "$serve" ]; then
    rc=0 # stopped as asked
    [ -z "${sleeper:-}" ] || kill "$sleeper" 2>/dev/null || true
  fi
  "${as_owner[@]}" "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  if [ "${IDEMGEN_PG_KEEP:-}" = 1 ]; then
    echo "with-postgres: kept $dir" >&2
  else
    rm -rf "$dir"
  fi
  exit "$rc"
}
trap stop EXIT INT TERM

"${as_owner[@]}" "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
  { cat "$dir/initdb.log" >&2; exit 1; }

started=
for attempt in 1 2 3 4 5; do
  port=${IDEMGEN_PG_PORT:-$(free_port)}
  # fsync stays on by default: the crash tests and benchmarks measure a server as users run it.
  if "${as_owner[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=300 -c shared_buffers=256MB" \
      start >/dev/null 2>&1; then
    started=1; break
  fi
done
if [ -z "$started" ]; then
  echo "with-postgres: server did not start; its log:" >&2
  cat "$dir/server.log" >&2 || true
  exit 1
fi

export DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
export IDEMGEN_TEST_DATABASE_URL="$DATABASE_URL"
export IDEMGEN_PG_BINDIR="$bindir"
export IDEMGEN_PG_DATADIR="$dir/data"
# The server's log (stderr of the postmaster): tests that check what PostgreSQL logs read it.
export IDEMGEN_PG_LOG="$dir/server.log"
echo "with-postgres: PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$port" >&2
if [ -n "$serve" ]; then
  cat <<MSG
PostgreSQL is up on 127.0.0.1:$port (user postgres, no password, database postgres); its log is
$dir/server.log. Connect with:

  export DATABASE_URL='$DATABASE_URL'
  psql "\$DATABASE_URL"

It stays up until you press Ctrl-C (or send SIGTERM to process $$); then it is stopped and its
folder deleted.
MSG
  # Sleep in the background and wait for it, so that the trap runs as soon as a signal arrives.
  while :; do
    sleep 3600 &
    sleeper=$!
    wait "$sleeper" || true
  done
fi
set +e
"$@"
