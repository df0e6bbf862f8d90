#!/usr/bin/env bash
# The bus security tests (test/security/bus.test.ts) and the secure-bus benchmarks start their own
# nats-server (Debian's /usr/sbin/nats-server) with the platform's generated users, permissions
# and TLS certificates (made with openssl). Installs whichever is missing; starts nothing.
set -euo pipefail
# apt_install (exported by .ci/run) reads APT_UPDATED, which is not exported with it.
APT_UPDATED="${APT_UPDATED:-}"
[ -x /usr/sbin/nats-server ] || apt_install nats-server
command -v openssl >/dev/null 2>&1 || apt_install openssl
/usr/sbin/nats-server --version
