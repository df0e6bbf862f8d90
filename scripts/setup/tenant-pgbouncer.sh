#!/usr/bin/env bash
# The pooled endpoint of the tenant server (dbaas pooledConnectionString, docs/databases.md
# "Pooled connections"): Debian's PgBouncer on 127.0.0.1:TENANT_POOLER_PORT (6433) in transaction
# mode in front of the tenant cluster (TENANT_PG_PORT, 5433). Tenants log in with their own role and
# password: PgBouncer looks the role's SCRAM verifier up through auth_query, run in the database
# connected to as the role TENANT_POOLER_ROLE (dbaas_pooler: LOGIN and nothing else), which may
# only call dbaas_guard.pooler_lookup(), a function dbaas puts in every client database that returns
# tenant roles only (never a superuser's, the admin's or its own). The one password PgBouncer keeps
# in a file is that role's (TENANT_POOLER_PASSWORD), mode 0600, owned by postgres.
# Idempotent: writes the configuration, creates or resets the role, (re)starts PgBouncer.
set -euo pipefail
. "$(dirname "$0")/common.sh"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"

PG_PORT="${TENANT_PG_PORT:-5433}"
PORT="${TENANT_POOLER_PORT:-6433}"
ROLE="${TENANT_POOLER_ROLE:-dbaas_pooler}"
POOL_SIZE="${TENANT_POOLER_POOL_SIZE:-3}"
: "${TENANT_POOLER_PASSWORD:?TENANT_POOLER_PASSWORD must be set}"
[[ "$ROLE" =~ ^[a-z_][a-z0-9_]*$ ]] || { echo "TENANT_POOLER_ROLE must be a plain lower-case name" >&2; exit 1; }
[[ "$TENANT_POOLER_PASSWORD" =~ ^[A-Za-z0-9_-]+$ ]] || { echo "TENANT_POOLER_PASSWORD: letters, digits, - and _ only" >&2; exit 1; }

apt_install pgbouncer
dir=/etc/pgbouncer
conf="$dir/tenant-pgbouncer.ini"
run_dir=/run/postgresql
mkdir -p "$dir" "$run_dir" && chown postgres:postgres "$run_dir"

(umask 077 && printf '"%s" "%s"\n' "$ROLE" "$TENANT_POOLER_PASSWORD" >"$dir/tenant-userlist.txt")
chown postgres:postgres "$dir/tenant-userlist.txt"
# The same ini as the compose and Kubernetes pooler (docker/pgbouncer/ini.sh), on loopback here.
TENANT_PG_HOST=127.0.0.1 TENANT_PG_PORT="$PG_PORT" TENANT_POOLER_LISTEN_ADDR=127.0.0.1 TENANT_POOLER_PORT="$PORT" \
  TENANT_POOLER_ROLE="$ROLE" TENANT_POOLER_POOL_SIZE="$POOL_SIZE" TENANT_POOLER_AUTH_FILE="$dir/tenant-userlist.txt" \
  TENANT_POOLER_PIDFILE="$run_dir/tenant-pgbouncer.pid" TENANT_POOLER_LOGFILE=/var/log/postgresql/tenant-pgbouncer.log \
  sh "$ROOT/docker/pgbouncer/ini.sh" >"$conf"
chown postgres:postgres "$conf"

# The role, as the compose and Kubernetes tenant server's first start makes it (the script on
# stdin: user postgres may not be able to read the checkout).
(cd / && TENANT_POOLER_ROLE="$ROLE" TENANT_POOLER_PASSWORD="$TENANT_POOLER_PASSWORD" PGPORT="$PG_PORT" \
  runuser -u postgres --preserve-environment -- sh -s <"$ROOT/docker/pgbouncer/pooler-role.sh" >/dev/null)

pidfile="$run_dir/tenant-pgbouncer.pid"
if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
  kill -HUP "$(cat "$pidfile")" # reload the configuration
else
  runuser -u postgres -- pgbouncer -d "$conf"
fi
wait_answer 127.0.0.1 "$PORT" 10 || { echo "PgBouncer did not start on $PORT" >&2; exit 1; }
echo "Tenant PgBouncer: 127.0.0.1:$PORT (transaction mode) in front of 127.0.0.1:$PG_PORT"
