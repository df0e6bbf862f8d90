#!/usr/bin/env bash
# One step before `docker compose up -d` (Compose v2) or `docker-compose up -d` (Debian 12's 1.29):
# writes .env from .env.example with every secret random (database passwords, JWT secret, one NATS
# password per user), the NATS server configuration and TLS certificates (npm run bus:config -- --tls),
# and the caller-token key pair (npm run caller:keys: the public key into .env, the private one into
# .env.gateway). Both files mode 0600; run again, it keeps what is set and fills only what is missing.
#   scripts/compose-env.sh                    in this checkout
#   PROJECT_DIR=/srv/ci scripts/compose-env.sh   for a copy of docker-compose.yml and docker/ there
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PROJECT_DIR="$(cd "${PROJECT_DIR:-$ROOT}" && pwd)"
ENV_FILE="$PROJECT_DIR/.env"
GATEWAY_ENV_FILE="$PROJECT_DIR/.env.gateway"
. "$ROOT/scripts/setup/common.sh"

if [ ! -f "$ENV_FILE" ]; then
  (umask 077 && cp "$ROOT/.env.example" "$ENV_FILE")
  echo "$ENV_FILE: made from .env.example"
fi
chmod 600 "$ENV_FILE"

# Every CHANGE-ME value but the caller key (made below as a key pair): a random secret.
tmp="$(mktemp)"
while IFS= read -r line || [ -n "$line" ]; do
  case "$line" in
    CALLER_VERIFY_KEY=*) printf '%s\n' "$line" ;;
    *=CHANGE-ME*) printf '%s=%s\n' "${line%%=*}" "$(random_secret)" ;;
    *) printf '%s\n' "$line" ;;
  esac
done <"$ENV_FILE" >"$tmp"
cat "$tmp" >"$ENV_FILE" && rm -f "$tmp"

# gpu-node's group: the group of this host's Docker socket, when there is one.
if [ -S /var/run/docker.sock ]; then
  gid="$(stat -c %g /var/run/docker.sock)"
  sed -i "s/^DOCKER_GID=.*/DOCKER_GID=$gid/" "$ENV_FILE"
fi

cd "$ROOT"
npx --no-install tsx deploy/nats/generate.ts --tls --out "$PROJECT_DIR/docker" --env-out "$ENV_FILE" >/dev/null
if [ ! -f "$GATEWAY_ENV_FILE" ]; then (umask 077 && : >"$GATEWAY_ENV_FILE"); fi
npx --no-install tsx deploy/caller-keys.ts --env-out "$ENV_FILE" --gateway-env-out "$GATEWAY_ENV_FILE" >/dev/null
chmod 600 "$GATEWAY_ENV_FILE"

if grep -n '^[^#]*CHANGE-ME' "$ENV_FILE" "$GATEWAY_ENV_FILE"; then
  echo "placeholders left above: set them by hand" >&2
  exit 1
fi
echo "$ENV_FILE and $GATEWAY_ENV_FILE ready: docker compose up -d (Compose 1: docker-compose up -d)"
