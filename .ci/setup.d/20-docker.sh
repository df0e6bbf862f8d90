#!/usr/bin/env bash
# Docker engine for the gpu-node executor tests, plus a local job image built without any
# registry (busybox-static imported from a folder). Idempotent: does only what is missing.
# The engine runs without a bridge, iptables or masquerading: test containers use NetworkMode
# "none", so no traffic ever leaves loopback.
set -euo pipefail
# apt_install (exported by .ci/run) reads APT_UPDATED, which is not exported with it.
APT_UPDATED="${APT_UPDATED:-}"

IMAGE="${TEST_JOB_IMAGE:-ci-platform/test-busybox:latest}"
LOG=/var/log/dockerd.log

engine_answers() { timeout 10 docker info >/dev/null 2>&1; }

wait_for_engine() {
  for _ in $(seq 1 120); do engine_answers && return 0; sleep 0.5; done
  return 1
}

if ! engine_answers; then
  command -v dockerd >/dev/null 2>&1 || apt_install docker.io
  command -v docker >/dev/null 2>&1 || apt_install docker.io
  mkdir -p /var/lib/docker
  # setsid + nohup: the engine outlives this script (and the CI step that ran it).
  setsid nohup dockerd --bridge=none --iptables=false --ip-masq=false --ip6tables=false \
    >>"$LOG" 2>&1 < /dev/null &
  dockerd_pid=$!
  if ! wait_for_engine; then
    # Nested in a container the overlay2 driver may be refused; vfs always works (slower copies).
    if grep -qiE 'overlay|storage.driver|driver not supported' "$LOG"; then
      kill "$dockerd_pid" 2>/dev/null || true
      wait "$dockerd_pid" 2>/dev/null || true
      setsid nohup dockerd --bridge=none --iptables=false --ip-masq=false --ip6tables=false \
        --storage-driver=vfs >>"$LOG" 2>&1 < /dev/null &
      wait_for_engine || { echo "Docker engine did not start; see $LOG" >&2; tail -n 30 "$LOG" >&2; exit 1; }
    else
      echo "Docker engine did not start; see $LOG" >&2
      tail -n 30 "$LOG" >&2
      exit 1
    fi
  fi
fi
echo "Docker engine: $(docker version --format '{{.Server.Version}}')"

if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
  apt_install busybox-static
  rootfs="$(mktemp -d)"
  trap 'rm -rf "$rootfs"' EXIT
  mkdir -p "$rootfs/bin" "$rootfs/tmp" "$rootfs/etc"
  chmod 1777 "$rootfs/tmp"
  cp /bin/busybox "$rootfs/bin/busybox"
  for applet in sh echo sleep cat yes head tail true false id env printf ls kill wc seq dd date grep touch mkdir rm; do
    ln -sf busybox "$rootfs/bin/$applet"
  done
  printf 'root:x:0:0:root:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/tmp:/bin/sh\n' >"$rootfs/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
  tar -C "$rootfs" -c . | docker import --change 'ENV PATH=/bin' - "$IMAGE" >/dev/null
  echo "Built $IMAGE"
fi
