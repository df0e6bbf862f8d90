#!/usr/bin/env bash
# Debian's docker-compose (1.29) validates docker-compose.yml offline (`docker-compose config -q`).
set -euo pipefail
if ! declare -F apt_install >/dev/null; then
  apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
fi
if command -v docker-compose >/dev/null; then exit 0; fi
apt_install docker-compose
docker-compose version
