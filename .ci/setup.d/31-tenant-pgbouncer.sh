#!/usr/bin/env bash
# PgBouncer in front of the tenant cluster of 30-tenant-postgres.sh (127.0.0.1:6433, transaction
# mode), with a pooler role whose password the tests know (a test cluster only).
set -euo pipefail
TENANT_POOLER_PASSWORD="${TENANT_POOLER_PASSWORD:-ci-tenant-pooler}" \
  bash "$(dirname "$0")/../../scripts/setup/tenant-pgbouncer.sh"
