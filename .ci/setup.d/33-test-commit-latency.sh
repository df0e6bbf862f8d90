#!/usr/bin/env bash
# Test machines only: the two PostgreSQL servers the tests use (the platform's state on 5432, the
# tenant cluster on 5433) commit without waiting for the disk (synchronous_commit = off). A crash
# of the machine could lose the last commits of a run, never corrupt data, and the tests never
# crash the machine; what it saves is the disk flush of every commit (about 10 ms on these virtual
# disks), paid by every test platform's start (its migrations) and every job state change.
# Durability in production is PostgreSQL's default and the quick start leaves it so.
set -euo pipefail
for url in "postgresql://postgres@127.0.0.1:5432/postgres" \
  "postgresql://${TENANT_PG_ADMIN_USER:-ci_admin}:${TENANT_PG_ADMIN_PASSWORD:-ci-tenant-admin}@127.0.0.1:5433/postgres"; do
  psql -X -q -v ON_ERROR_STOP=1 "$url" -c "ALTER SYSTEM SET synchronous_commit = off" -c "SELECT pg_reload_conf()" >/dev/null
done
echo "synchronous_commit = off on the test servers (5432, 5433)"
