#!/usr/bin/env bash
# The tenant PostgreSQL cluster that hosts client databases (DBAAS_ADMIN_URL): a second cluster
# on 127.0.0.1:TENANT_PG_PORT (5433) that checks passwords (scram-sha-256 over TCP, peer on the
# socket), with a superuser TENANT_PG_ADMIN_USER whose password is TENANT_PG_ADMIN_PASSWORD.
# Used by the quick start (generated password) and CI (a known test password).
# TENANT_PG_TLS=1: TLS only (hostssl; plain TCP rejected) with a self-signed certificate made by
# openssl for localhost/127.0.0.1, whose copy clients trust is written to TENANT_PG_TLS_CA_OUT.
# TENANT_PG_WAL_ARCHIVE=DIR: archives the write-ahead log into DIR (owned by postgres) for dbaas's
# point-in-time restore (DBAAS_PITR_WAL_DIR; docs/databases.md "Point-in-time restore"); restarts
# the cluster once when archiving was off.
# Idempotent: creates, configures and starts only what is missing; resets the admin's password.
set -euo pipefail
. "$(dirname "$0")/common.sh"

PORT="${TENANT_PG_PORT:-5433}"
CLUSTER="${TENANT_PG_CLUSTER:-tenant}"
ADMIN_USER="${TENANT_PG_ADMIN_USER:-ci_admin}"
: "${TENANT_PG_ADMIN_PASSWORD:?TENANT_PG_ADMIN_PASSWORD must be set}"

command -v pg_createcluster >/dev/null 2>&1 || apt_install postgresql
ver="$(pg_version)"
conf_dir="/etc/postgresql/$ver/$CLUSTER"
# dbaas's snapshots and branches run pg_dump / pg_restore of the server's major version.
apt_install "postgresql-client-$ver"

if [ ! -f "$conf_dir/postgresql.conf" ]; then
  rm -rf "$conf_dir" # what a dropped cluster may leave behind (conf.d)
  if answers 127.0.0.1 "$PORT"; then
    echo "Port $PORT is taken by another server; set TENANT_PG_PORT or free it" >&2
    exit 1
  fi
  pg_createcluster "$ver" "$CLUSTER" -p "$PORT" -- --auth-local=peer --auth-host=scram-sha-256 >/dev/null
  cat >"$conf_dir/conf.d/ci-tenant.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PORT
password_encryption = 'scram-sha-256'
max_connections = 200
CONF
  echo "Created PostgreSQL $ver cluster '$CLUSTER' on port $PORT"
fi

if [ -n "${TENANT_PG_TLS:-}" ]; then
  ca_out="${TENANT_PG_TLS_CA_OUT:-/etc/ci-platform/tenant-tls-ca.pem}"
  if [ ! -f "$conf_dir/server.crt" ]; then
    command -v openssl >/dev/null 2>&1 || apt_install openssl
    # Self-signed, so the certificate is its own CA: clients that verify trust this file.
    openssl req -x509 -newkey rsa:2048 -nodes -days 825 -subj "/CN=localhost" \
      -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
      -keyout "$conf_dir/server.key" -out "$conf_dir/server.crt" 2>/dev/null
    chown postgres:postgres "$conf_dir/server.key" "$conf_dir/server.crt"
    chmod 600 "$conf_dir/server.key"
  fi
  cat >"$conf_dir/conf.d/ci-tenant-tls.conf" <<CONF
ssl = on
ssl_cert_file = '$conf_dir/server.crt'
ssl_key_file = '$conf_dir/server.key'
CONF
  # TLS or nothing over TCP: a plain-text connection is refused before any password is sent.
  hba="$conf_dir/pg_hba.conf"
  if ! grep -q '^hostnossl' "$hba"; then
    sed -i -E 's/^host(\s+all\s+all\s+)/hostssl\1/' "$hba"
    printf 'hostnossl all all 0.0.0.0/0 reject\nhostnossl all all ::/0 reject\n' >>"$hba"
    answers 127.0.0.1 "$PORT" && pg_ctlcluster --skip-systemctl-redirect "$ver" "$CLUSTER" restart
  fi
  mkdir -p "$(dirname "$ca_out")"
  install -m 644 "$conf_dir/server.crt" "$ca_out"
  echo "Tenant PostgreSQL TLS: clients trust $ca_out"
fi

if [ -n "${TENANT_PG_WAL_ARCHIVE:-}" ]; then
  archive="$TENANT_PG_WAL_ARCHIVE"
  [[ "$archive" =~ ^/[A-Za-z0-9/._-]+$ ]] || { echo "TENANT_PG_WAL_ARCHIVE must be an absolute path of plain characters" >&2; exit 1; }
  mkdir -p "$archive" && chown postgres:postgres "$archive" && chmod 750 "$archive"
  want="archive_mode = on
archive_command = 'test ! -f $archive/%f && cp %p $archive/%f.partial && mv $archive/%f.partial $archive/%f'
archive_timeout = 300"
  if [ "$(cat "$conf_dir/conf.d/ci-tenant-archive.conf" 2>/dev/null)" != "$want" ]; then
    printf '%s\n' "$want" >"$conf_dir/conf.d/ci-tenant-archive.conf"
    # archive_mode takes a restart
    answers 127.0.0.1 "$PORT" && pg_ctlcluster --skip-systemctl-redirect "$ver" "$CLUSTER" restart
  fi
fi

if ! answers 127.0.0.1 "$PORT"; then
  pg_ctlcluster --skip-systemctl-redirect "$ver" "$CLUSTER" start
  wait_answer 127.0.0.1 "$PORT" 10 || { echo "Tenant cluster did not start on $PORT" >&2; exit 1; }
fi

(cd / && runuser -u postgres -- psql -X -q -p "$PORT" -d postgres -v ON_ERROR_STOP=1 \
  -v user="$ADMIN_USER" -v password="$TENANT_PG_ADMIN_PASSWORD" <<'SQL'
SELECT format('CREATE ROLE %I SUPERUSER LOGIN', :'user') WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'user') \gexec
SELECT format('ALTER ROLE %I SUPERUSER LOGIN PASSWORD %L', :'user', :'password') \gexec
SQL
)
echo "Tenant PostgreSQL: postgresql://$ADMIN_USER:***@127.0.0.1:$PORT/postgres (scram-sha-256)"
