#!/usr/bin/env bash
# kubectl for `kubectl kustomize` (test/integration/ops.kustomize.test.ts renders k8s/overlays/example
# offline). The machine image ships one (kustomize v5); otherwise Debian's kubernetes-client. Idempotent.
set -euo pipefail
# apt_install (exported by .ci/run) reads APT_UPDATED, which is not exported with it.
APT_UPDATED="${APT_UPDATED:-}"
if ! declare -F apt_install >/dev/null; then
  apt_install() { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
fi
if ! command -v kubectl >/dev/null; then apt_install kubernetes-client; fi
kubectl version --client 2>/dev/null | head -2
