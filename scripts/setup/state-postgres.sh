#!/usr/bin/env bash
# The platform's own PostgreSQL (DATABASE_URL) on 127.0.0.1:5432: installed from Debian and
# started when nothing answers there.
#   STATE_PG_AUTH=password (the quick start): Debian's default authentication stays (passwords
#     over TCP); role STATE_PG_USER gets STATE_PG_PASSWORD and may create the platform's database.
#   STATE_PG_AUTH=trust (CI and the development machines): loopback connections need no password.
# Idempotent.
set -euo pipefail
. "$(dirname "$0")/common.sh"

MODE="${STATE_PG_AUTH:-password}"
PORT=5432

if ! answers 127.0.0.1 "$PORT"; then
  apt_install postgresql
  ver="$(pg_version)"
  if [ "$MODE" = trust ]; then
    sed -i -E 's/^(host\s+all\s+all\s+127\.0\.0\.1\/32\s+)\S+/\1trust/; s/^(local\s+all\s+all\s+)\S+/\1trust/; s/^(local\s+all\s+postgres\s+)\S+/\1trust/' \
      "/etc/postgresql/$ver/main/pg_hba.conf"
  fi
  pg_ctlcluster --skip-systemctl-redirect "$ver" main start 2>/dev/null || true
  wait_answer 127.0.0.1 "$PORT" 10 || { echo "PostgreSQL did not start on $PORT" >&2; exit 1; }
fi

if [ "$MODE" = password ]; then
  : "${STATE_PG_USER:?}" "${STATE_PG_PASSWORD:?}"
  runuser -u postgres -- psql -X -q -p "$PORT" -d postgres -v ON_ERROR_STOP=1 \
    -v user="$STATE_PG_USER" -v password="$STATE_PG_PASSWORD" <<'SQL'
SELECT format('CREATE ROLE %I LOGIN CREATEDB', :'user') WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'user') \gexec
SELECT format('ALTER ROLE %I LOGIN CREATEDB PASSWORD %L', :'user', :'password') \gexec
SQL
  echo "Platform PostgreSQL: postgresql://$STATE_PG_USER:***@127.0.0.1:$PORT (passwords checked)"
fi
