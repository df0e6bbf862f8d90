#!/usr/bin/env bash
# A second tenant cluster for the TLS tests: 127.0.0.1:5434, TLS only (a plain-text connection is
# refused), a self-signed certificate made by openssl; clients trust /etc/ci-platform/tenant-tls-ca.pem.
# The same script as 30-tenant-postgres.sh, with TLS on.
set -euo pipefail
TENANT_PG_PORT=5434 TENANT_PG_CLUSTER=tenanttls TENANT_PG_TLS=1 \
  TENANT_PG_ADMIN_USER=ci_admin TENANT_PG_ADMIN_PASSWORD="${TENANT_PG_ADMIN_PASSWORD:-ci-tenant-admin}" \
  bash "$(dirname "$0")/../../scripts/setup/tenant-postgres.sh"
