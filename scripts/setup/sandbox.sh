#!/usr/bin/env bash
# The job sandbox of the process executor (services/gpu-node/sandbox.ts): bubblewrap and prlimit
# from Debian, then a probe that makes the same kind of sandbox a job gets, as uid 65534 (user
# namespaces must be allowed by the kernel). Idempotent.
#   SANDBOX_STRICT=1      a failing probe is an error (CI); otherwise a warning (the quick start)
#   SANDBOX_TEST_TOOLS=1  also busybox-static, whose nc the hostile-job tests use
set -euo pipefail
. "$(dirname "$0")/common.sh"

command -v bwrap >/dev/null 2>&1 || apt_install bubblewrap
command -v prlimit >/dev/null 2>&1 || apt_install util-linux
if [ "${SANDBOX_TEST_TOOLS:-}" = 1 ]; then [ -x /bin/busybox ] || apt_install busybox-static; fi

lib64=()
if [ -L /lib64 ]; then lib64=(--symlink "$(readlink /lib64)" /lib64); elif [ -d /lib64 ]; then lib64=(--ro-bind /lib64 /lib64); fi
as_nobody=()
if [ "$(id -u)" = 0 ]; then as_nobody=(setpriv --reuid 65534 --regid 65534 --clear-groups); fi
if env -i "${as_nobody[@]}" bwrap --unshare-all --die-with-parent --new-session --uid 65534 --gid 65534 \
  --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib "${lib64[@]}" --proc /proc --dev /dev \
  /usr/bin/prlimit --nproc=64 -- /bin/sh -c 'exit 0'; then
  echo "Job sandbox: $(bwrap --version) works"
else
  echo "Job sandbox: bubblewrap is installed but cannot create its namespaces here (user namespaces" \
    "disabled? sysctl kernel.unprivileged_userns_clone / user.max_user_namespaces)." >&2
  if [ "${SANDBOX_STRICT:-}" = 1 ]; then exit 1; fi
  echo "gpu-node will run no process jobs (it says why on /ready) unless Docker answers." >&2
fi

# Per-job cgroups (services/gpu-node/cgroup-host.ts): the node bounds each job's memory (its /tmp and
# /dev/shm included), processes and CPU where it can write a cgroup with the memory controller.
own=$(sed -n 's/^0:://p' /proc/self/cgroup 2>/dev/null)
if grep -qw memory "/sys/fs/cgroup${own}/cgroup.controllers" 2>/dev/null || [ -d /sys/fs/cgroup/memory ]; then
  echo "Job cgroups: a memory controller is here (gpu-node says at start what it enforces)"
else
  echo "Job cgroups: none writable here: process jobs' total memory, processes and CPU are not bounded (GPU_REQUIRE_CGROUPS=true refuses jobs instead)" >&2
fi

