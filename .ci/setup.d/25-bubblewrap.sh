#!/usr/bin/env bash
# bubblewrap: the sandbox of process jobs (services/gpu-node/sandbox.ts), and busybox-static,
# whose nc the hostile-job tests use inside sandboxes and containers alike. Then a probe: the
# same kind of sandbox a job gets, as uid 65534 (user namespaces must be allowed). Idempotent.
set -euo pipefail
# apt_install (exported by .ci/run) reads APT_UPDATED, which is not exported with it.
APT_UPDATED="${APT_UPDATED:-}"
if ! declare -F apt_install >/dev/null; then
  apt_install() { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
fi
command -v bwrap >/dev/null 2>&1 || apt_install bubblewrap
[ -x /bin/busybox ] || apt_install busybox-static
command -v prlimit >/dev/null 2>&1 || apt_install util-linux

lib64=()
if [ -L /lib64 ]; then lib64=(--symlink "$(readlink /lib64)" /lib64); elif [ -d /lib64 ]; then lib64=(--ro-bind /lib64 /lib64); fi
as_nobody=()
if [ "$(id -u)" = 0 ]; then as_nobody=(setpriv --reuid 65534 --regid 65534 --clear-groups); fi
if ! env -i "${as_nobody[@]}" bwrap --unshare-all --die-with-parent --new-session --uid 65534 --gid 65534 \
  --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib "${lib64[@]}" --proc /proc --dev /dev \
  /usr/bin/prlimit --nproc=64 -- /bin/sh -c 'exit 0'; then
  echo "bubblewrap is installed but its sandbox does not work here (user namespaces disabled?" \
    "sysctl kernel.unprivileged_userns_clone / user.max_user_namespaces)" >&2
  exit 1
fi
echo "bubblewrap: $(bwrap --version)"
