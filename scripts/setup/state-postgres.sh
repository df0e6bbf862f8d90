#!/usr/bin/env bash
# The platform's own PostgreSQL (DATABASE_URL) on 127.0.0.1:5432: installed from Debian and
# started when nothing answers there.
#   STATE_PG_AUTH=password (the quick start): Debian's default authentication stays (passwords
#     over TCP); role STATE_PG_USER gets STATE_PG_PASSWORD and owns the platform's database
#     (STATE_PG_DATABASE, ci_platform), created here.
#   STATE_PG_AUTH=trust (CI and the development machines): loopback connections need no password.
# Idempotent.
set -euo pipefail
. "$(dirname "$0")/common.sh"

MODE="${STATE_PG_AUTH:-password}"
PORT=5432

trust_loopback() {
  sed -i -E 's/^(host\s+all\s+all\s+127\.0\.0\.1\/32\s+)\S+/\1trust/; s/^(local\s+all\s+all\s+)\S+/\1trust/; s/^(local\s+all\s+postgres\s+)\S+/\1trust/' \
    "/etc/postgresql/$1/main/pg_hba.conf"
}

if ! answers 127.0.0.1 "$PORT"; then
  apt_install postgresql
  ver="$(pg_version)"
  # Debian's package creates the cluster `main`; make it when the package was installed without it.
  [ -f "/etc/postgresql/$ver/main/postgresql.conf" ] || pg_createcluster "$ver" main -p "$PORT" >/dev/null
  [ "$MODE" = trust ] && trust_loopback "$ver"
  pg_ctlcluster --skip-systemctl-redirect "$ver" main start 2>/dev/null || true
  wait_answer 127.0.0.1 "$PORT" 10 || { echo "PostgreSQL did not start on $PORT" >&2; exit 1; }
elif [ "$MODE" = trust ] && [ -d /etc/postgresql ] && ! PGCONNECT_TIMEOUT=3 psql -w -X -q -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -c 'SELECT 1' >/dev/null 2>&1; then
  # A test machine set up by the quick start first: the suite needs the passwordless loopback
  # superuser of the development machines (and a trust server that dbaas must refuse).
  ver="$(pg_version)"
  echo "PostgreSQL on $PORT checks passwords; switching loopback to trust for the tests (test machines only)" >&2
  trust_loopback "$ver"
  pg_ctlcluster --skip-systemctl-redirect "$ver" main reload
fi

if [ "$MODE" = password ]; then
  : "${STATE_PG_USER:?}" "${STATE_PG_PASSWORD:?}"
  (cd / && runuser -u postgres -- psql -X -q -p "$PORT" -d postgres -v ON_ERROR_STOP=1 \
    -v user="$STATE_PG_USER" -v password="$STATE_PG_PASSWORD" -v db="${STATE_PG_DATABASE:-ci_platform}" <<'SQL'
SELECT format('CREATE ROLE %I LOGIN CREATEDB', :'user') WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'user') \gexec
SELECT format('ALTER ROLE %I LOGIN CREATEDB PASSWORD %L', :'user', :'password') \gexec
SELECT format('CREATE DATABASE %I OWNER %I TEMPLATE template0', :'db', :'user') WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db') \gexec
SQL
)
  echo "Platform PostgreSQL: postgresql://$STATE_PG_USER:***@127.0.0.1:$PORT (passwords checked)"
fi
