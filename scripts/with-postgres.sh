#!/usr/bin/env bash
# with-postgres.sh CMD [ARGS...]
#
# Starts a throwaway PostgreSQL server (initdb in a temporary folder, a free loopback port),
# runs CMD with DATABASE_URL and IDEMGEN_TEST_DATABASE_URL pointing at it, then stops the server
# and deletes the folder, whatever CMD's outcome. CMD's exit status is this script's.
#
# If the PostgreSQL server binaries are missing, they are installed from Debian's packages.
# initdb refuses to run as root, so as root the cluster belongs to the `postgres` user.
# Set IDEMGEN_PG_KEEP=1 to keep the folder (and its server log) for a post-mortem. The log's path
# is exported as IDEMGEN_PG_LOG.
set -euo pipefail

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
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
  else
    sudo apt-get update -qq >&2 && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
  fi
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
  port=$(free_port)
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
set +e
"$@"
