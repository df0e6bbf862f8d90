#!/usr/bin/env bash
# Debian's Chromium for the browser test of /api/docs (driven by playwright-core, no download).
set -euo pipefail
if ! declare -F apt_install >/dev/null; then
  apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
fi
if [ -x /usr/bin/chromium ]; then exit 0; fi
apt_install chromium
/usr/bin/chromium --version
