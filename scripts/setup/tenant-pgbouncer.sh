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
cat >"$conf" <<CONF
; Written by scripts/setup/tenant-pgbouncer.sh
[databases]
* = host=127.0.0.1 port=$PG_PORT

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
unix_socket_dir =
pidfile = $run_dir/tenant-pgbouncer.pid
logfile = /var/log/postgresql/tenant-pgbouncer.log
auth_type = scram-sha-256
auth_file = $dir/tenant-userlist.txt
auth_user = $ROLE
auth_query = SELECT usename, passwd FROM dbaas_guard.pooler_lookup(\$1)
pool_mode = transaction
; Server connections per database (its role): part of the role's CONNECTION LIMIT, which the server
; enforces, so the pooler never exceeds an account's share. Keep it at most the smallest share.
default_pool_size = $POOL_SIZE
max_client_conn = 2000
server_idle_timeout = 60
query_wait_timeout = 60
ignore_startup_parameters = extra_float_digits
CONF
chown postgres:postgres "$conf"

(cd / && runuser -u postgres -- psql -X -q -p "$PG_PORT" -d postgres -v ON_ERROR_STOP=1 -v role="$ROLE" -v password="$TENANT_POOLER_PASSWORD" <<'SQL'
SELECT format('CREATE ROLE %I LOGIN', :'role') WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('ALTER ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS CONNECTION LIMIT 50 PASSWORD %L', :'role', :'password') \gexec
SQL
)

pidfile="$run_dir/tenant-pgbouncer.pid"
if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
  kill -HUP "$(cat "$pidfile")" # reload the configuration
else
  runuser -u postgres -- pgbouncer -d "$conf"
fi
wait_answer 127.0.0.1 "$PORT" 10 || { echo "PgBouncer did not start on $PORT" >&2; exit 1; }
echo "Tenant PgBouncer: 127.0.0.1:$PORT (transaction mode) in front of 127.0.0.1:$PG_PORT"
