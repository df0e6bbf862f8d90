#!/usr/bin/env bash
# The tenant PostgreSQL cluster the dbaas tests provision client databases on: a second cluster
# on 127.0.0.1:5433 that checks passwords (scram-sha-256 over TCP, unlike the trust-auth main
# cluster), with a superuser `ci_admin` whose password is known to the tests (a test cluster only).
# Idempotent: creates, configures and starts only what is missing.
set -euo pipefail
# apt_install (exported by .ci/run) reads APT_UPDATED, which is not exported with it.
APT_UPDATED="${APT_UPDATED:-}"
answers() { timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }

PORT="${TENANT_PG_PORT:-5433}"
CLUSTER=tenant
ADMIN_USER=ci_admin
ADMIN_PASSWORD="${TENANT_PG_ADMIN_PASSWORD:-ci-tenant-admin}"

if ! command -v pg_createcluster >/dev/null 2>&1; then apt_install postgresql; fi
ver="$(ls /etc/postgresql 2>/dev/null | sort -n | tail -1)"
if [ -z "$ver" ]; then
  ver="$(ls /usr/lib/postgresql | sort -n | tail -1)"
fi
conf_dir="/etc/postgresql/$ver/$CLUSTER"

if [ ! -f "$conf_dir/postgresql.conf" ]; then
  rm -rf "$conf_dir" # what a dropped cluster may leave behind (conf.d)
  if answers 127.0.0.1 "$PORT"; then
    echo "Port $PORT is taken by another server; set TENANT_PG_PORT or free it" >&2
    exit 1
  fi
  # Unix socket: peer (only the postgres OS user administers it); TCP: passwords, SCRAM only.
  pg_createcluster "$ver" "$CLUSTER" -p "$PORT" -- --auth-local=peer --auth-host=scram-sha-256 >/dev/null
  cat >"$conf_dir/conf.d/ci-tenant.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $PORT
password_encryption = 'scram-sha-256'
max_connections = 200
EOF
  echo "Created PostgreSQL $ver cluster '$CLUSTER' on port $PORT"
fi

if ! answers 127.0.0.1 "$PORT"; then
  pg_ctlcluster --skip-systemctl-redirect "$ver" "$CLUSTER" start
  for _ in $(seq 1 50); do answers 127.0.0.1 "$PORT" && break; sleep 0.2; done
  answers 127.0.0.1 "$PORT" || { echo "Tenant cluster did not start on $PORT" >&2; exit 1; }
fi

# The admin role the platform connects as (DBAAS_ADMIN_URL); created or its password reset.
runuser -u postgres -- psql -X -q -p "$PORT" -d postgres -v ON_ERROR_STOP=1 \
  -v user="$ADMIN_USER" -v password="$ADMIN_PASSWORD" <<'SQL'
SELECT format('CREATE ROLE %I SUPERUSER LOGIN', :'user') WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'user') \gexec
SELECT format('ALTER ROLE %I SUPERUSER LOGIN PASSWORD %L', :'user', :'password') \gexec
SQL
echo "Tenant PostgreSQL: postgresql://$ADMIN_USER:***@127.0.0.1:$PORT/postgres (scram-sha-256)"
