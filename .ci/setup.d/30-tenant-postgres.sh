#!/usr/bin/env bash
# The tenant PostgreSQL cluster the tests provision client databases on: 127.0.0.1:5433,
# scram-sha-256 over TCP, superuser `ci_admin` with a password the tests know (a test cluster
# only), archiving its WAL for point-in-time restore. The same script the quick start runs with a generated password.
set -euo pipefail
TENANT_PG_WAL_ARCHIVE="${TENANT_PG_WAL_ARCHIVE:-/var/lib/postgresql/pitr/tenant/wal}" TENANT_PG_ADMIN_USER=ci_admin TENANT_PG_ADMIN_PASSWORD="${TENANT_PG_ADMIN_PASSWORD:-ci-tenant-admin}" \
  bash "$(dirname "$0")/../../scripts/setup/tenant-postgres.sh"
