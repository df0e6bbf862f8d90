#!/usr/bin/env bash
# The job sandbox of the process executor: bubblewrap from Debian, and a probe that it can make
# the namespaces a job runs in (user namespaces may be disabled on some kernels).
set -euo pipefail
. "$(dirname "$0")/common.sh"

command -v bwrap >/dev/null 2>&1 || apt_install bubblewrap
if bwrap --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
  --proc /proc --dev /dev --tmpfs /tmp --unshare-all --uid 65534 --gid 65534 --die-with-parent \
  --new-session /bin/true 2>/dev/null; then
  echo "Job sandbox: bubblewrap $(bwrap --version | awk '{print $2}') works"
else
  echo "Job sandbox: bubblewrap is installed but cannot create namespaces here (user namespaces disabled?);" >&2
  echo "gpu-node will refuse process jobs unless Docker answers" >&2
fi
