#!/bin/sh
# The tenant pooler's pgbouncer.ini, on stdout: one file for every set-up (docs/databases.md "Pooled
# connections"): the quick start and CI (scripts/setup/tenant-pgbouncer.sh), the compose stack and
# Kubernetes (entrypoint.sh in the image of ./Dockerfile). Transaction mode in front of the tenant
# server; tenants log in with their own role and password, which PgBouncer looks up through
# auth_query as TENANT_POOLER_ROLE (pooler-role.sh: LOGIN and nothing else), calling only
# dbaas_guard.pooler_lookup(), which dbaas puts in every client database (services/dbaas/pooler-sql.ts).
#   TENANT_PG_HOST, TENANT_PG_PORT            the tenant server              (127.0.0.1, 5433)
#   TENANT_POOLER_LISTEN_ADDR, _PORT          where PgBouncer listens        (127.0.0.1, 6433)
#   TENANT_POOLER_ROLE                        the auth_query role            (dbaas_pooler)
#   TENANT_POOLER_POOL_SIZE                   server connections per database (3)
#   TENANT_POOLER_AUTH_FILE                   the file holding that role's password (required)
#   TENANT_POOLER_PIDFILE, _LOGFILE           empty: none (logs on stderr)
set -eu
: "${TENANT_POOLER_AUTH_FILE:?TENANT_POOLER_AUTH_FILE must be set}"
role="${TENANT_POOLER_ROLE:-dbaas_pooler}"
size="${TENANT_POOLER_POOL_SIZE:-3}"
case "$role" in *[!a-z0-9_]* | [!a-z_]* | '')
  echo "TENANT_POOLER_ROLE must be a plain lower-case name" >&2
  exit 1
  ;;
esac
case "$size" in *[!0-9]* | '' | 0)
  echo "TENANT_POOLER_POOL_SIZE must be a positive integer" >&2
  exit 1
  ;;
esac
cat <<CONF
; Written by docker/pgbouncer/ini.sh
[databases]
* = host=${TENANT_PG_HOST:-127.0.0.1} port=${TENANT_PG_PORT:-5433}

[pgbouncer]
listen_addr = ${TENANT_POOLER_LISTEN_ADDR:-127.0.0.1}
listen_port = ${TENANT_POOLER_PORT:-6433}
unix_socket_dir =
pidfile = ${TENANT_POOLER_PIDFILE:-}
logfile = ${TENANT_POOLER_LOGFILE:-}
auth_type = scram-sha-256
auth_file = $TENANT_POOLER_AUTH_FILE
auth_user = $role
auth_query = SELECT usename, passwd FROM dbaas_guard.pooler_lookup(\$1)
pool_mode = transaction
; Server connections per database (its role): part of the role's CONNECTION LIMIT, which the server
; enforces, so the pooler never exceeds an account's share. Keep it at most the smallest share, and
; run one pooler per tenant server: each one's pools count against the same shares.
default_pool_size = $size
max_client_conn = 2000
server_idle_timeout = 60
query_wait_timeout = 60
ignore_startup_parameters = extra_float_digits
CONF
