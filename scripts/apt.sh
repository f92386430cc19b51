# apt.sh: sourced by scripts/test.sh, with-postgres.sh, with-redis.sh and with-pgbouncer.sh, never run.
#
# apt_install PKG...  installs Debian packages (as root, or through sudo) and waits for the
#                     apt and dpkg locks that another apt-get, dpkg or unattended-upgrades run
#                     holds, up to IDEMGEN_APT_WAIT seconds (default 600), instead of failing at
#                     once with "Could not get lock". The package lists are refreshed (apt-get
#                     update) only when the install cannot go ahead without them (a fresh
#                     machine has none; a stale list names files the mirror no longer has).
#                     Output goes to stderr.

apt_install() {
  local wait=${IDEMGEN_APT_WAIT:-600}
  if apt_get_waiting "$wait" install -y -qq --no-install-recommends "$@"; then
    return 0
  fi
  echo "apt: refreshing the package lists and trying again" >&2
  apt_get_waiting "$wait" update -qq && apt_get_waiting "$wait" install -y -qq --no-install-recommends "$@"
}

# apt_get_waiting SECONDS ARGS...: apt-get ARGS, waiting up to SECONDS for the locks. dpkg's
# frontend lock is waited for by apt itself (DPkg::Lock::Timeout, apt 1.9.11 and later); the
# lists lock that `apt-get update` takes is not, so a refusal naming a lock is retried.
apt_get_waiting() {
  local wait=$1 err rc deadline
  shift
  local run=(env DEBIAN_FRONTEND=noninteractive)
  [ "$(id -u)" = 0 ] || run=(sudo "${run[@]}")
  err=$(mktemp)
  deadline=$((SECONDS + wait))
  while :; do
    rc=0
    "${run[@]}" apt-get -o "DPkg::Lock::Timeout=$wait" "$@" >&2 2>"$err" || rc=$?
    if [ "$rc" = 0 ]; then
      rm -f "$err"
      return 0
    fi
    if ! grep -qiE 'could not get lock|unable to acquire|unable to lock' "$err" || [ "$SECONDS" -ge "$deadline" ]; then
      cat "$err" >&2
      rm -f "$err"
      return "$rc"
    fi
    echo "apt: another apt-get or dpkg holds the lock; waiting ($(grep -ioE 'held by process [0-9]+ \([^)]*\)' "$err" | head -1))" >&2
    sleep 3
  done
}
