#!/usr/bin/env bash
# The registry-free bases test/e2e/ops.stack.test.ts builds on (README "Operations: the compose
# stack, tested"): the platform's base image (debootstrap bookworm + Node 20, rootfs cached in
# /var/cache/ci-platform) and the servers' image (Debian's PostgreSQL, PgBouncer, Redis, nats-server). A warm
# machine keeps both and this step takes a second; a fresh one takes about 5 minutes (debootstrap
# and apt from the Debian mirror). Idempotent.
set -euo pipefail
# apt_install (exported by .ci/run) reads APT_UPDATED, which is not exported with it.
APT_UPDATED="${APT_UPDATED:-}"
if ! declare -F apt_install >/dev/null; then
  apt_install() { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
fi
root="$(cd "$(dirname "$0")/../.." && pwd)"
command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
command -v ss >/dev/null 2>&1 || apt_install iproute2
BASE_IMAGE="${BASE_IMAGE:-ci-platform-base:bookworm-node20}"
export BASE_IMAGE
bash "$root/scripts/image/base.sh"
docker build -q --network host --build-arg BASE_IMAGE="$BASE_IMAGE" -t ci-platform-test/servers:bookworm \
  -f "$root/test/fixtures/compose/servers.Dockerfile" "$root/test/fixtures/compose" >/dev/null
echo "ci-platform-test/servers:bookworm ready"
