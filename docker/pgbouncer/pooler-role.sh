#!/bin/sh
# Creates or resets the pooler's auth_query role on the tenant server (docs/databases.md "Pooled
# connections"): TENANT_POOLER_ROLE (dbaas_pooler) with LOGIN and nothing else, password
# TENANT_POOLER_PASSWORD. dbaas then grants it CONNECT on each client database and EXECUTE on that
# database's dbaas_guard.pooler_lookup() only. Idempotent. Run by the tenant server's first start
# (compose and Kubernetes mount it in /docker-entrypoint-initdb.d, executable), by
# scripts/setup/tenant-pgbouncer.sh, and by hand on a server initialised before the pooler existed,
# or after changing the password:
#   docker compose exec tenant-postgres /docker-entrypoint-initdb.d/50-pooler-role.sh
# psql connects as PGUSER, else POSTGRES_USER (the official image's superuser), else postgres, to
# the database postgres (PGHOST/PGPORT as set, the local socket otherwise).
set -eu
role="${TENANT_POOLER_ROLE:-dbaas_pooler}"
: "${TENANT_POOLER_PASSWORD:?TENANT_POOLER_PASSWORD must be set}"
case "$role" in *[!a-z0-9_]* | [!a-z_]* | '')
  echo "TENANT_POOLER_ROLE must be a plain lower-case name" >&2
  exit 1
  ;;
esac
case "$TENANT_POOLER_PASSWORD" in *[!A-Za-z0-9_-]*)
  echo "TENANT_POOLER_PASSWORD: letters, digits, - and _ only" >&2
  exit 1
  ;;
esac
psql -X -q -v ON_ERROR_STOP=1 -U "${PGUSER:-${POSTGRES_USER:-postgres}}" -d postgres -v role="$role" -v password="$TENANT_POOLER_PASSWORD" <<'SQL'
SELECT format('CREATE ROLE %I LOGIN', :'role') WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('ALTER ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS CONNECTION LIMIT 50 PASSWORD %L', :'role', :'password') \gexec
SQL
echo "pooler role $role ready"
