#!/usr/bin/env bash
# Debian's docker-compose (1.29): test/unit/ops.compose.test.ts validates docker-compose.yml with
# `docker-compose config`, offline. Idempotent.
set -euo pipefail
# apt_install (exported by .ci/run) reads APT_UPDATED, which is not exported with it.
APT_UPDATED="${APT_UPDATED:-}"
if ! declare -F apt_install >/dev/null; then
  apt_install() { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
fi
if ! command -v docker-compose >/dev/null; then apt_install docker-compose; fi
docker-compose version --short
