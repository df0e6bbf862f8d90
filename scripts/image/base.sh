#!/usr/bin/env bash
# The image's base made without any registry (README "Operations: the image without a registry"):
# a Debian bookworm root filesystem from debootstrap (minbase, from the machine's configured Debian
# mirror) plus this machine's Node.js 20 (binary and npm copied: Debian bookworm ships Node 18),
# user `node` (uid 1000) as in the official image, imported as BASE_IMAGE. The debootstrap tarball
# is cached in CACHE_DIR, so a warm run skips debootstrap; an existing BASE_IMAGE is kept as is.
#   BASE_IMAGE  ci-platform-base:bookworm-node20      CACHE_DIR  /var/cache/ci-platform
#   MIRROR      the first Debian URI in /etc/apt       REBUILD=1  re-import even if BASE_IMAGE exists
set -euo pipefail
BASE_IMAGE="${BASE_IMAGE:-ci-platform-base:bookworm-node20}"
CACHE_DIR="${CACHE_DIR:-/var/cache/ci-platform}"
NODE_MAJOR=20

if [ "${REBUILD:-}" != 1 ] && docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  echo "$BASE_IMAGE exists"
  exit 0
fi

# The mirror apt already uses on this machine (deb822 .sources or one-line .list).
debian_mirror() {
  local uri
  uri="$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -vE 'security|updates' | head -1 || true)"
  [ -n "$uri" ] || uri="$(grep -hE '^deb\s' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '{print $2}' | grep -v security | head -1 || true)"
  printf '%s' "${uri:-http://deb.debian.org/debian}"
}
MIRROR="${MIRROR:-$(debian_mirror)}"

node_bin="$(readlink -f "$(command -v node)")"
node_version="$("$node_bin" --version)"
case "$node_version" in v"$NODE_MAJOR".*) ;; *)
  echo "This machine's node is $node_version; the image needs Node $NODE_MAJOR" >&2
  exit 1
  ;;
esac
npm_dir="$(dirname "$node_bin")/../lib/node_modules/npm"
[ -f "$npm_dir/package.json" ] || { echo "npm not found beside $node_bin" >&2; exit 1; }

arch="$(dpkg --print-architecture)"
tarball="$CACHE_DIR/bookworm-minbase-$arch.tar"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [ ! -f "$tarball" ]; then
  command -v debootstrap >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; }
  echo "debootstrap bookworm (minbase) from $MIRROR"
  # libstdc++6: node links it; ca-certificates: TLS to the platform's providers and npm.
  debootstrap --variant=minbase --include=libstdc++6,ca-certificates bookworm "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 ||
    { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }
  rm -rf "$work/rootfs"/var/cache/apt/*.bin "$work/rootfs"/var/cache/apt/archives/*.deb "$work/rootfs"/var/lib/apt/lists/* "$work/rootfs"/var/log/*.log
  mkdir -p "$CACHE_DIR"
  tar -C "$work/rootfs" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  rm -rf "$work/rootfs"
fi

mkdir "$work/rootfs"
tar -C "$work/rootfs" -xf "$tarball"
root="$work/rootfs"
install -m 0755 "$node_bin" "$root/usr/local/bin/node"
mkdir -p "$root/usr/local/lib/node_modules"
cp -a "$npm_dir" "$root/usr/local/lib/node_modules/npm"
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
chroot "$root" groupadd --gid 1000 node
chroot "$root" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
chroot "$root" /usr/local/bin/node --version >/dev/null
tar -C "$root" -c . | docker import \
  --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --change "ENV NODE_VERSION=${node_version#v}" \
  --change "LABEL org.opencontainers.image.description=\"debootstrap bookworm minbase + Node ${node_version}\"" \
  --change 'CMD ["node"]' \
  - "$BASE_IMAGE" >/dev/null
echo "$BASE_IMAGE: $(docker image inspect -f '{{.Size}}' "$BASE_IMAGE" | awk '{printf "%.0f MB", $1/1e6}') (Node $node_version, Debian $(cat "$root/etc/debian_version"))"
