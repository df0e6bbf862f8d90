#!/bin/sh
# The pooler container (./Dockerfile; compose's tenant-pgbouncer, k8s/base/14-tenant-pgbouncer.yaml):
# writes the auth_query role's password file and ini.sh's configuration into TENANT_POOLER_RUN_DIR
# (a tmpfs or emptyDir: the root filesystem stays read-only), mode 0600, then runs PgBouncer in the
# foreground as PID 1 (SIGTERM: PgBouncer's immediate shutdown; SIGINT: after the running transactions).
# In a container it listens on every address, port 6432, unless told otherwise (ini.sh's variables).
set -eu
: "${TENANT_POOLER_PASSWORD:?TENANT_POOLER_PASSWORD must be set}"
here="$(dirname "$0")"
dir="${TENANT_POOLER_RUN_DIR:-/tmp/pgbouncer}"
role="${TENANT_POOLER_ROLE:-dbaas_pooler}"
case "$TENANT_POOLER_PASSWORD" in *[!A-Za-z0-9_-]*)
  echo "TENANT_POOLER_PASSWORD: letters, digits, - and _ only" >&2
  exit 1
  ;;
esac
umask 077
mkdir -p "$dir"
printf '"%s" "%s"\n' "$role" "$TENANT_POOLER_PASSWORD" >"$dir/userlist.txt"
TENANT_POOLER_AUTH_FILE="$dir/userlist.txt" \
  TENANT_POOLER_LISTEN_ADDR="${TENANT_POOLER_LISTEN_ADDR:-*}" \
  TENANT_POOLER_PORT="${TENANT_POOLER_PORT:-6432}" \
  sh "$here/ini.sh" >"$dir/pgbouncer.ini"
unset TENANT_POOLER_PASSWORD
exec pgbouncer "$dir/pgbouncer.ini"
