#!/usr/bin/env bash
# The Secrets of a Kubernetes overlay (k8s/overlays/example): writes <overlay>/secrets/ (mode 0700)
# for its secretGenerator and configMapGenerator: random database passwords (the pooler's role's
# too) and JWT secret, one NATS password per role and per GPU host with NATS's CA and server
# certificate (npm run bus:config -- --tls), the caller-token key pair (npm run caller:keys). Kept
# when present.
#   scripts/k8s-secrets.sh [overlay dir] [gpu host,…]     defaults: k8s/overlays/example gpu-host-1
# GPU hosts other than gpu-host-1: also run `npm run bus:config -- --k8s k8s/base/10-nats.yaml --nodes …`.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OVERLAY="$(cd "${1:-$ROOT/k8s/overlays/example}" && pwd)"
NODES="${2:-gpu-host-1}"
OUT="$OVERLAY/secrets"
. "$ROOT/scripts/setup/common.sh"
# The pooler's role password (tenant-pgbouncer): also added to an overlay whose secrets predate it.
pooler_env() {
  [ -f "$OUT/tenant-pooler.env" ] || (umask 077 && echo "TENANT_POOLER_PASSWORD=$(random_secret)" >"$OUT/tenant-pooler.env")
}
if [ -f "$OUT/platform.env" ]; then
  pooler_env
  echo "$OUT: kept"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$OUT" && chmod 700 "$OUT"
cd "$ROOT"
# Passwords and certificates as the compose setup makes them, in a scratch folder.
: >"$work/nats.env"
npx --no-install tsx deploy/nats/generate.ts --tls --nodes "$NODES" --out "$work" --env-out "$work/nats.env" >/dev/null
npx --no-install tsx deploy/caller-keys.ts --env-out "$work/caller.env" --gateway-env-out "$work/gateway.env" >/dev/null
nats_password() { sed -n "s/^NATS_PASSWORD_$1=//p" "$work/nats.env"; }

pg="$(random_secret)"
tenant="$(random_secret)"
(
  umask 077
  cat >"$OUT/platform.env" <<ENV
JWT_SECRET=$(random_secret)$(random_secret)
POSTGRES_PASSWORD=$pg
TENANT_PG_PASSWORD=$tenant
DATABASE_URL=postgresql://ci:$pg@postgres.ci-platform.svc.cluster.local:5432/ci_platform
DBAAS_ADMIN_URL=postgresql://tenant_admin:$tenant@tenant-postgres.ci-platform.svc.cluster.local:5432/postgres
ENV
  grep '^CALLER_VERIFY_KEY=' "$work/caller.env" >"$OUT/caller-verify.env"
  grep '^CALLER_SIGNING_KEY=' "$work/gateway.env" >"$OUT/caller-signing.env"
  for role in api-gateway auth gpu-scheduler inference dbaas metrics admin usage core; do
    echo "NATS_PASSWORD=$(nats_password "$(echo "$role" | tr 'a-z-' 'A-Z_')")" >"$OUT/nats-$role.env"
  done
  : >"$OUT/nats-gpu-node-passwords.env"
  : >"$OUT/nats-gpu-nodes.env"
  for node in ${NODES//,/ }; do
    key="GPU_NODE_$(echo "$node" | tr 'a-z-' 'A-Z_')"
    echo "NATS_PASSWORD_$key=$(nats_password "$key")" >>"$OUT/nats-gpu-node-passwords.env"
    echo "$node=$(nats_password "$key")" >>"$OUT/nats-gpu-nodes.env"
  done
  cp "$work/nats-tls/ca.pem" "$work/nats-tls/server.pem" "$work/nats-tls/server-key.pem" "$OUT/"
)
pooler_env
if grep -l '^[^=]*=$' "$OUT"/*.env; then
  echo "empty values in the files above" >&2
  exit 1
fi
echo "$OUT written: kubectl kustomize $OVERLAY | kubectl apply -f -"
