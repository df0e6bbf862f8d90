#!/usr/bin/env bash
# Debian's Chromium for the browser test of /api/docs (test/e2e/ops.docs.test.ts drives it with
# playwright-core; nothing is downloaded by the test). Idempotent.
set -euo pipefail
# apt_install (exported by .ci/run) reads APT_UPDATED, which is not exported with it.
APT_UPDATED="${APT_UPDATED:-}"
if ! declare -F apt_install >/dev/null; then
  apt_install() { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
fi
if [ ! -x /usr/bin/chromium ]; then apt_install chromium; fi
/usr/bin/chromium --version
